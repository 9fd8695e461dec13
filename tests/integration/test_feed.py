"""Consumer groups: delivery, acknowledgement, recovery of a dead consumer's entries, trimming."""

import pytest
from trainwarden.events.feed import ALL_GROUPS, DISPATCH_GROUP, NOTIFY_GROUP, GroupReader, trim_feed

from tests.helpers import metric, wait_for

pytestmark = pytest.mark.redis


def reader(r, store, name, group=DISPATCH_GROUP):
    g = GroupReader(r, stream=store.keys.feed(), group=group, consumer=name)
    g.ensure_group()
    return g


def test_group_delivers_each_entry_once_across_consumers(r, store):
    a, b = reader(r, store, "a"), reader(r, store, "b")
    for i in range(1, 6):
        store.append([metric(f"run{i}", 1, loss=1.0)])
    got = a.read(count=3) + b.read(count=10)
    assert len(got) == 5
    assert len({fid for fid, _ in got}) == 5
    assert a.read() == [] and b.read() == []


def test_group_created_late_still_sees_history(r, store):
    store.append([metric("exp01", 1, loss=1.0)])
    assert len(reader(r, store, "late").read()) == 1


def test_entries_of_a_dead_consumer_are_claimed_after_idle_time(r, store):
    dead, alive = reader(r, store, "dead"), reader(r, store, "alive")
    store.append([metric("exp01", 1, loss=1.0)])
    taken = dead.read()
    assert len(taken) == 1
    assert alive.claim_stale(min_idle_ms=60_000) == []  # not idle long enough yet
    claimed = wait_for(lambda: alive.claim_stale(min_idle_ms=50), what="the stale entry to be claimable")
    assert [fid for fid, _ in claimed] == [fid for fid, _ in taken]
    alive.ack([claimed[0][0]])
    assert alive.pending() == 0


def test_trim_keeps_what_any_group_has_not_acknowledged(r, store):
    groups = {g: reader(r, store, "c", group=g) for g in ALL_GROUPS}
    for i in range(1, 11):
        store.append([metric("exp01", i, loss=1.0)])
    dispatch = groups[DISPATCH_GROUP].read(count=100)
    groups[DISPATCH_GROUP].ack([fid for fid, _ in dispatch])
    notify = groups[NOTIFY_GROUP].read(count=100)
    groups[NOTIFY_GROUP].ack([fid for fid, _ in notify[:4]])  # 6 still pending for the notifier
    assert trim_feed(r, stream=store.keys.feed()) == 4
    assert r.xlen(store.keys.feed()) == 6
    groups[NOTIFY_GROUP].ack([fid for fid, _ in notify[4:]])
    trim_feed(r, stream=store.keys.feed())
    assert r.xlen(store.keys.feed()) <= 1


def test_trim_waits_for_groups_that_do_not_exist_yet(r, store):
    reader(r, store, "c", group=DISPATCH_GROUP)
    store.append([metric("exp01", 1, loss=1.0)])
    assert trim_feed(r, stream=store.keys.feed()) == 0


def test_a_group_lost_with_redis_data_is_created_again(r, store):
    """Redis restarted without its data (no AOF): the readers go on instead of failing with NOGROUP."""
    a = reader(r, store, "a")
    store.append([metric("exp01", 1, loss=1.0)])
    assert len(a.read()) == 1
    for read in (a.read_own_pending, lambda: a.claim_stale(min_idle_ms=0), a.read):
        r.flushall()
        assert read() == []
    store.append([metric("exp01", 2, loss=1.0)])
    assert len(a.read()) == 1

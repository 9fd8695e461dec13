"""The workers' checkpoint repository and run lock, and the archive's state, on a real Redis: the optimistic
update commits all or nothing, and a checkpoint that moved under a transaction fails it (nothing written)."""

from __future__ import annotations

import time

import pytest
import redis
from trainwarden.events import archive_state
from trainwarden.events.checkpoints import read_checkpoint, watch_checkpoints
from trainwarden.events.envelope import make_event
from trainwarden.events.errors import StoreUnavailable
from trainwarden.events.feed import GroupReader
from trainwarden.events.keys import Keys
from trainwarden.events.run_lock import RunLock
from trainwarden.events.store import EventStore

KEYS = Keys()


def test_a_checkpoint_is_written_with_the_outputs_in_one_transaction(store: EventStore, r: redis.Redis) -> None:
    out = make_event("decision", run="a", host="h", producer="worker/a", seq=1, data={})
    with watch_checkpoints(r, KEYS, ["a"]) as tx:
        assert tx.read("a") == {}
        tx.begin()
        store.append([out], pipeline=tx.pipeline)
        tx.write("a", {"after": "1-0", "pending": "[]"})
        assert tx.commit()
    assert read_checkpoint(r, KEYS, "a") == {b"after": b"1-0", b"pending": b"[]"}
    assert store.length("a") == 1


def test_a_checkpoint_that_moved_fails_the_commit_and_nothing_is_written(store: EventStore, r: redis.Redis) -> None:
    r.hset(KEYS.cursor("a"), mapping={"after": "1-0", "pending": "[]"})
    out = make_event("decision", run="a", host="h", producer="worker/a", seq=1, data={})
    with watch_checkpoints(r, KEYS, ["a", "b"]) as tx:
        assert tx.read("a")[b"after"] == b"1-0"
        r.hset(KEYS.cursor("a"), "after", "2-0")  # another job committed meanwhile
        tx.begin()
        store.append([out], pipeline=tx.pipeline)
        tx.write("a", {"after": "3-0"})
        tx.write_pending("b", '[{"kind": "stop"}]')
        assert not tx.commit()
    assert read_checkpoint(r, KEYS, "a")[b"after"] == b"2-0"
    assert read_checkpoint(r, KEYS, "b") == {}
    assert store.length("a") == 0


def test_a_run_lock_is_held_by_one_and_lost_when_it_expires(r: redis.Redis) -> None:
    first = RunLock(r, KEYS, "a", timeout_s=0.3)
    assert first.acquire()
    assert not RunLock(r, KEYS, "a", timeout_s=0.3).acquire(blocking=False)
    assert first.extend()
    assert first.release()
    assert first.acquire()
    time.sleep(0.5)  # expired: taken by another job
    assert RunLock(r, KEYS, "a", timeout_s=5).acquire(blocking=False)
    assert not first.extend()
    assert not first.release()


def test_the_archive_trim_checks_the_lease_and_the_head(store: EventStore, r: redis.Redis) -> None:
    ids = store.append([make_event("metrics", run="a", host="h", producer="p", seq=i + 1, data={}) for i in range(3)])
    assert ids is not None
    lease = KEYS.archiving("a")
    assert archive_state.lease_take(r, lease, "me", ttl_ms=10_000, run="a")
    assert not archive_state.lease_take(r, lease, "other", ttl_ms=10_000, run="a")
    assert archive_state.lease_holder(r, lease, run="a") == "me"
    args = {"first": ids[0], "last": ids[1], "minid": ids[2], "name": "f1", "record": "{}"}
    assert archive_state.commit_trim(r, KEYS, "a", **args, lease="other") == (-3, "me")
    assert archive_state.commit_trim(r, KEYS, "a", **args, lease="me") == (2, "")
    assert archive_state.record_values(r, KEYS, "a") == [b"{}"]
    assert archive_state.commit_trim(r, KEYS, "a", **args, lease="me") == (-1, ids[2])  # the head moved
    assert not archive_state.lease_swap(r, lease, "other", "", ttl_ms=1, what="release", run="a")
    assert archive_state.lease_swap(r, lease, "me", "", ttl_ms=1, what="release", run="a")
    assert archive_state.lease_holder(r, lease, run="a") == ""


def test_the_archive_sees_checkpoints_and_unfinished_feed_entries(store: EventStore, r: redis.Redis) -> None:
    assert list(archive_state.unfinished_feed_entries(r, KEYS)) == []  # no feed yet
    r.hset(KEYS.cursor("a"), "after", "5-0")
    assert archive_state.checkpoint_hashes(r, KEYS, "a") == ({b"after": b"5-0"}, {})
    store.append([make_event("metrics", run="a", host="h", producer="p", seq=1, data={})])
    reader = GroupReader(r, stream=KEYS.feed(), group="g", consumer="c")
    reader.ensure_group()
    assert [(g, s) for g, _, _, s in archive_state.unfinished_feed_entries(r, KEYS)] == [("g", "not read yet")]
    reader.read(count=10)
    assert [(g, s) for g, _, _, s in archive_state.unfinished_feed_entries(r, KEYS)] == [("g", "not acknowledged")]


def test_reading_a_checkpoint_from_an_unreachable_redis_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable):
        read_checkpoint(redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1), KEYS, "a")

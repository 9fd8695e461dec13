"""What every store backend must do (events/backend.py), on Redis, Redis Cluster and in memory.

The event log: appends idempotent by (producer, seq), one ordered log per run, ranges. The feed:
one entry per batch that stored something, in order per run. Consumer groups: consumers share a
group's entries, an ack removes an entry from the pending list, what is left unacknowledged is
read again by its consumer and claimable by another after it went idle. Leases: one holder at a
time, renewed, lapsing after the TTL, released only by their holder, fenced.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest
from trainwarden.events.backend import Backend
from trainwarden.events.envelope import Event
from trainwarden.events.errors import LeaseLost
from trainwarden.events.feed import DISPATCH_GROUP, NOTIFY_GROUP, FeedEntry, parse_feed_entry
from trainwarden.events.sids import sid_key
from trainwarden.events.store import Malformed, decode_entries

from tests.helpers import metric

TTL_S = 0.3  # a lease's TTL where a test waits it out: long enough for a loaded 2-core machine's calls
IDLE_MS = 500  # how long a feed entry stays pending before another consumer may claim it (loaded-machine margin)


def seqs(items: list[tuple[str, Event | Malformed]]) -> list[int]:
    return [e.seq for _, e in items if isinstance(e, Event)]


def feed(backend: Backend, group: str = DISPATCH_GROUP, consumer: str = "c1") -> list[FeedEntry]:
    reader = backend.feed_reader(group, consumer)
    reader.ensure_group()
    return [parse_feed_entry(fid, fields) for fid, fields in reader.read(count=1000)]


# -- the event log ---------------------------------------------------------------------------------


def test_the_same_event_appended_twice_is_stored_once(backend: Backend):
    log = backend.log
    first = log.append([metric("a", 1, loss=1.0), metric("a", 2, loss=0.5)])
    assert all(first) and len(first) == 2
    assert log.append([metric("a", 1, loss=1.0), metric("a", 2, loss=0.5)]) == [None, None]
    assert log.append_one(metric("a", 2, loss=0.5)) is None
    assert log.append_count([metric("a", 2), metric("a", 3)]) == 1
    assert seqs(log.read("a")) == [1, 2, 3] and log.length("a") == 3


def test_an_event_at_or_below_its_producers_high_water_mark_is_skipped_and_other_producers_are_not(backend: Backend):
    log = backend.log
    assert log.append_one(metric("a", 5)) is not None
    assert log.append_one(metric("a", 4)) is None  # below the mark: a retry of something older, already covered
    assert log.append_one(metric("a", 4, producer="other")) is not None  # its own mark
    assert log.append_one(metric("b", 1)) is not None  # marks are per run
    big = 2**60 + 1  # beyond a double's precision: compared exactly
    assert log.append_one(replace(metric("a", big), ts=2000.0)) is not None
    assert log.append_one(replace(metric("a", big - 1), ts=2000.0)) is None
    assert seqs(log.read("a")) == [5, 4, big]


def test_events_keep_their_order_within_a_run_and_ids_come_back_in_input_order(backend: Backend):
    log = backend.log
    batch = [metric(run, seq) for seq in range(1, 6) for run in ("a", "b")]  # runs interleaved in one batch
    ids = log.append(batch)
    assert all(ids)
    for run in ("a", "b"):
        mine = [sid for sid, e in zip(ids, batch, strict=True) if e.run == run]
        assert [sid for sid, _ in log.read(run)] == mine
        assert mine == sorted(mine, key=lambda sid: sid_key(str(sid)))
    log.append([metric("a", seq) for seq in range(6, 9)])
    assert seqs(log.read("a")) == list(range(1, 9)) and seqs(log.read("b")) == list(range(1, 6))


def test_ranges_read_after_an_id_between_ids_page_by_page_and_one_by_id(backend: Backend):
    log = backend.log
    ids = [str(sid) for sid in log.append([metric("a", seq, loss=float(seq)) for seq in range(1, 11)])]
    assert seqs(log.read("a", after=ids[2])) == list(range(4, 11))
    assert seqs(log.read("a", after=ids[2], count=3)) == [4, 5, 6]
    assert seqs(list(log.iter_run("a", start=ids[1], until=ids[4]))) == [2, 3, 4, 5]  # both ends included
    assert seqs(list(log.iter_run("a", after=ids[7]))) == [9, 10]
    assert seqs(list(log.iter_run("a", page=3))) == list(range(1, 11))
    got = log.get("a", ids[6])
    assert isinstance(got, Event) and got.seq == 7 and got.data == {"loss": 7.0}
    assert log.get("a", "1-1") is None and log.get("b", ids[6]) is None
    assert log.read("nothing") == [] and list(log.iter_run("nothing")) == [] and log.length("nothing") == 0


def test_runs_are_read_newest_first_from_an_end_a_page_at_a_time(backend: Backend):
    log = backend.log
    sids = [sid for sid in log.append([metric("a", i) for i in range(1, 6)]) if sid is not None]
    log.append_one(metric("b", 1))

    def ids(page: list[tuple[bytes, dict[bytes, bytes]]]) -> list[str]:
        return [sid.decode() for sid, _ in page]

    a, b, unknown = log.newest_pages([("a", "+"), ("b", "+"), ("nope", "+")], count=3, what="read")
    assert ids(a) == sids[:1:-1] and len(b) == 1 and unknown == []
    (below,) = log.newest_pages([("a", f"({sids[2]}")], count=10, what="read")  # `(id` excludes it
    assert ids(below) == [sids[1], sids[0]]
    (upto,) = log.newest_pages([("a", sids[2])], count=2, what="read")  # an id includes it
    assert ids(upto) == [sids[2], sids[1]]
    assert seqs(decode_entries(a, "a")) == [5, 4, 3]  # the entries as stored: the store's decoding reads them


def test_runs_are_listed_most_recent_first_with_the_time_of_their_last_batch(backend: Backend):
    log = backend.log
    log.append([metric("a", 1), metric("a", 2)])  # ts 1001, 1002
    log.append([metric("b", 1)])  # ts 1001
    assert log.runs() == [("a", 1002.0), ("b", 1001.0)]
    log.append([metric("b", 9)])
    assert log.runs() == [("b", 1009.0), ("a", 1002.0)]
    assert [run for run, _ in log.runs()] == ["b", "a"]


def test_dead_letters_keep_the_entry_and_the_reason_newest_first(backend: Backend):
    log = backend.log
    log.dead_letter(source="dispatch", sid="1-0", reason="garbage", fields={b"e": b"?"})
    log.dead_letter(source="notify", sid="2-0", reason="worse", fields={b"x": b"y"})
    letters = log.dead_letters()
    assert [(d.source, d.sid, d.reason) for d in letters] == [
        ("notify", "2-0", "worse"),
        ("dispatch", "1-0", "garbage"),
    ]
    assert "garbage" not in letters[0].raw and "'x': 'y'" in letters[0].raw
    assert len(log.dead_letters(count=1)) == 1


# -- the feed ----------------------------------------------------------------------------------------


def test_each_batch_that_stored_something_appears_once_in_the_feed_in_order_per_run(backend: Backend):
    log = backend.log
    first = log.append([metric("a", 1), metric("a", 2), metric("b", 1)])
    log.append([metric("a", 1), metric("b", 1)])  # only duplicates: no feed entry
    third = log.append([metric("a", 3)])
    entries = feed(backend)
    assert [(e.run, e.first, e.last) for e in entries] == [
        ("a", first[0], first[1]), ("b", first[2], first[2]), ("a", third[0], third[0])
    ]  # fmt: skip
    assert all(e.types == frozenset({"metric"}) for e in entries)
    assert sorted((e.fid for e in entries), key=sid_key) == [e.fid for e in entries]
    assert feed(backend, consumer="c2") == []  # each entry is delivered once per group


# -- consumer groups -----------------------------------------------------------------------------------


def test_two_consumers_of_a_group_share_its_entries_and_another_group_sees_them_all(backend: Backend):
    backend.log.append([metric("a", 1)])
    backend.log.append([metric("b", 1)])
    backend.log.append([metric("c", 1)])
    one, two = backend.feed_reader(DISPATCH_GROUP, "c1"), backend.feed_reader(DISPATCH_GROUP, "c2")
    one.ensure_group()
    got_one, got_two = one.read(count=2), two.read(count=10)
    assert len(got_one) == 2 and len(got_two) == 1
    assert {parse_feed_entry(*e).run for e in got_one + got_two} == {"a", "b", "c"}
    assert one.read() == [] and two.read() == []
    assert {e.run for e in feed(backend, NOTIFY_GROUP)} == {"a", "b", "c"}


def test_an_ack_removes_an_entry_from_the_pending_list_and_what_is_unacked_is_read_again(backend: Backend):
    for run in ("a", "b", "c"):
        backend.log.append([metric(run, 1)])
    reader = backend.feed_reader(DISPATCH_GROUP, "c1")
    reader.ensure_group()
    ids = [fid for fid, _ in reader.read()]
    assert reader.pending() == 3
    reader.ack(ids[:2])
    assert reader.pending() == 1
    again = reader.read_own_pending()
    assert [fid for fid, _ in again] == ids[2:] and parse_feed_entry(*again[0]).run == "c"
    assert backend.feed_reader(DISPATCH_GROUP, "c2").read_own_pending() == []  # another consumer's are not its own
    reader.ack(ids[2:])
    assert reader.pending() == 0 and reader.read_own_pending() == []


def test_an_entry_left_unacked_is_claimable_by_another_consumer_only_after_it_went_idle(backend: Backend):
    backend.log.append([metric("a", 1)])
    dead, alive = backend.feed_reader(DISPATCH_GROUP, "dead"), backend.feed_reader(DISPATCH_GROUP, "alive")
    dead.ensure_group()
    [(fid, _)] = dead.read()
    assert alive.claim_stale(min_idle_ms=60_000) == []
    time.sleep(IDLE_MS / 1000 + 0.05)
    claimed = alive.claim_stale(min_idle_ms=IDLE_MS)
    assert [c[0] for c in claimed] == [fid] and parse_feed_entry(*claimed[0]).run == "a"
    assert [p[0] for p in alive.read_own_pending()] == [fid] and dead.read_own_pending() == []
    assert dead.claim_stale(min_idle_ms=IDLE_MS) == []  # claiming made it fresh again
    time.sleep(IDLE_MS / 1000 + 0.05)
    assert [p[0] for p in alive.read_own_pending()] == [fid]  # reading it again makes it fresh too
    assert dead.claim_stale(min_idle_ms=IDLE_MS) == []
    alive.ack([fid])
    assert alive.pending() == 0


def test_a_blocked_read_returns_an_entry_appended_while_it_waits(backend: Backend):
    reader = backend.feed_reader(DISPATCH_GROUP, "c1")
    reader.ensure_group()
    started = time.monotonic()
    assert reader.read(block_ms=100) == [] and time.monotonic() - started >= 0.09
    timer = threading.Timer(0.2, lambda: backend.log.append([metric("a", 1)]))
    timer.start()
    try:
        got = reader.read(block_ms=10_000)
    finally:
        timer.join()
    assert [parse_feed_entry(*e).run for e in got] == ["a"]


# -- leases ------------------------------------------------------------------------------------------


def test_a_lease_has_one_holder_who_renews_it(backend: Backend):
    a, b = backend.lease("role", ttl_s=30, host="h"), backend.lease("role", ttl_s=30, host="h")
    mine = a.acquire()
    assert mine.mine and a.held and mine.holder == a.holder
    other = b.acquire()
    assert not other.mine and other.holder == a.holder and other.token == mine.token and 0 < other.ttl_s <= 30
    assert not b.held and not b.renew()
    assert a.renew() and a.acquire().mine  # acquiring again extends it: still one token
    assert a.token == mine.token
    a.check()
    with pytest.raises(LeaseLost):
        b.check()


def test_a_lease_expires_after_its_ttl_and_the_next_holder_fences_the_old_one(backend: Backend):
    a, b = backend.lease("role", ttl_s=TTL_S, host="h"), backend.lease("role", ttl_s=30, host="h")
    first = a.acquire()
    time.sleep(TTL_S + 0.1)
    assert not a.held
    with pytest.raises(LeaseLost, match="lapsed"):  # lapsed, though nobody took it yet: it may not act
        a.check()
    second = b.acquire()
    assert second.mine and second.token > first.token
    assert not a.renew()  # lapsed and taken: no longer its own
    with pytest.raises(LeaseLost, match="stands by"):
        a.check()
    b.check()


def test_a_lease_renewed_or_acquired_again_outlives_its_first_ttl(backend: Backend):
    a, b = backend.lease("role", ttl_s=1.5, host="h"), backend.lease("role", ttl_s=30, host="h")
    a.acquire()
    time.sleep(0.9)
    assert a.renew()
    time.sleep(0.9)  # past the first TTL, well within the renewed one
    assert a.held and not b.acquire().mine
    assert a.acquire().mine  # its holder acquiring again extends it too
    time.sleep(0.9)  # past the renewed TTL, within the one the second acquire set
    assert a.held and not b.acquire().mine
    a.check()


def test_a_lease_is_released_only_by_its_holder(backend: Backend):
    stale, holder, waiting = (backend.lease("role", ttl_s=ttl, host="h") for ttl in (TTL_S, 30, 30))
    waiting.release()  # holds nothing: gives nothing up
    stale.acquire()
    time.sleep(TTL_S + 0.1)
    assert holder.acquire().mine
    stale.release()  # its token is no longer the lease's: the release changes nothing
    assert not waiting.acquire().mine and holder.renew()
    holder.release()
    assert not holder.held and waiting.acquire().mine
    waiting.check()


def test_a_lease_is_stolen_only_from_a_holder_whose_process_ended_on_this_host(backend: Backend):
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    dead_pid = int(ended.stdout)
    gone, here, elsewhere = (backend.lease("role", ttl_s=30, host=host) for host in ("h", "h", "other"))
    gone.holder = f"h:{dead_pid}:cafe"
    assert gone.acquire().mine
    assert not elsewhere.acquire().mine  # another host's process cannot be probed: it waits for the TTL
    taken = here.acquire()
    assert taken.mine and here.token is not None and here.token > (gone.token or 0)
    with pytest.raises(LeaseLost):
        gone.check()

"""The small repositories in events/ on a real Redis: what each stores, where, and that its errors come back
as trainwarden's (the one Redis error mapping; no call site outside events/ wraps them again)."""

from __future__ import annotations

import time

import pytest
import redis
from trainwarden.events import control, flags, health, history, progress, schedule, stats
from trainwarden.events.envelope import make_event
from trainwarden.events.errors import StoreUnavailable
from trainwarden.events.feed import DISPATCH_GROUP, GroupReader
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore

KEYS = Keys()
DEAD = "redis://127.0.0.1:1/0"  # nothing listens there


def events(run: str, n: int) -> list:
    return [make_event("metrics", run=run, host="h", producer="p", seq=i + 1, data={"step": i}) for i in range(n)]


def test_control_messages_are_sent_and_read_back_in_order(r: redis.Redis) -> None:
    first = control.send_control(r, KEYS, "gpu1", {"op": "watch", "run": "a"}, what="register a run")
    control.send_control(r, KEYS, "gpu1", {"op": "stop", "run": "a"}, what="stop a run")
    got = control.read_control(r, KEYS.agent_control("gpu1"), "0-0", count=10)
    assert [f[b"op"] for _, f in got] == [b"watch", b"stop"]
    assert got[0][0].decode() == first
    assert [f[b"op"] for _, f in control.read_control(r, KEYS.agent_control("gpu1"), first, count=10)] == [b"stop"]
    assert control.read_control(r, KEYS.agent_control("gpu2"), "0-0", count=10) == []


def test_history_reads_newest_first_in_pages(store: EventStore, r: redis.Redis) -> None:
    ids = store.append(events("run-a", 5))
    assert ids is not None
    page = history.newest_first(r, KEYS, "run-a", count=2, what="read")
    assert [sid.decode() for sid, _ in page] == [ids[4], ids[3]]
    after = history.newest_first(r, KEYS, "run-a", end=f"({ids[3]}", count=10, what="read")
    assert [sid.decode() for sid, _ in after] == [ids[2], ids[1], ids[0]]
    pages = history.newest_pages(r, KEYS, [("run-a", "+"), ("run-b", "+")], count=1, what="read")
    assert [[sid.decode() for sid, _ in p] for p in pages] == [[ids[4]], []]
    assert [sid.decode() for sid, _ in history.oldest_first(r, KEYS, "run-a", end=ids[1], count=None,
                                                             what="read")] == ids[:2]  # fmt: skip
    assert history.has_written(r, KEYS, "run-a", "p") and not history.has_written(r, KEYS, "run-a", "other")
    assert history.known_run(r, KEYS, "run-a") and not history.known_run(r, KEYS, "run-b")


def test_progress_says_when_the_dispatcher_was_last_alive_and_how_far_behind_the_workers_are(
    store: EventStore, r: redis.Redis
) -> None:
    assert progress.last_alive(r, KEYS, "dispatcher") is None
    assert progress.backlog(r, KEYS, DISPATCH_GROUP) == progress.Backlog(0, None)  # no group yet
    progress.mark_alive(r, KEYS, "dispatcher", 1234.5)
    assert progress.last_alive(r, KEYS, "dispatcher") == 1234.5
    store.append(events("run-a", 2))
    reader = GroupReader(r, stream=KEYS.feed(), group=DISPATCH_GROUP, consumer="c")
    reader.ensure_group()
    delivered = reader.read(count=10)
    behind = progress.backlog(r, KEYS, DISPATCH_GROUP)
    assert behind.pending == len(delivered) > 0 and behind.oldest == delivered[0][0]


def test_queued_flags_are_set_once_and_cleared_for_both_lanes(r: redis.Redis) -> None:
    assert flags.flag_queued(r, KEYS, ["a", "b"], fast=False, ttl_s=10, reclaimed=False) == {"a", "b"}
    assert flags.flag_queued(r, KEYS, ["a", "c"], fast=False, ttl_s=10, reclaimed=False) == {"c"}  # NX
    assert flags.flag_queued(r, KEYS, ["a"], fast=True, ttl_s=10, reclaimed=False) == {"a"}  # the other lane
    assert 0 < r.ttl(KEYS.queued("a")) <= 10
    flags.clear_queued(r, KEYS, "a")
    assert not r.exists(KEYS.queued("a"), KEYS.fast("a"))
    # a reclaimed entry flags only the runs whose flag is gone
    assert flags.flag_queued(r, KEYS, ["a", "b"], fast=False, ttl_s=10, reclaimed=True) == {"a"}


def test_a_slack_request_signature_is_first_once(r: redis.Redis) -> None:
    assert flags.first_request(r, KEYS, "v0=abc", ttl_s=600)
    assert not flags.first_request(r, KEYS, "v0=abc", ttl_s=600)
    assert 590 < r.ttl(KEYS.slack_request("v0=abc")) <= 600


def test_the_tick_schedule_gives_what_is_due_and_pushes_only_scheduled_runs_back(r: redis.Redis) -> None:
    r.zadd(KEYS.schedule(), {"a": 10.0, "b": 20.0, "c": 99.0})
    due = schedule.due_runs(r, KEYS, 50.0, count=10)
    assert due == [(b"a", 10.0), (b"b", 20.0)]
    assert schedule.due_runs(r, KEYS, 50.0, count=1) == [(b"a", 10.0)]
    r.zrem(KEYS.schedule(), "b")  # taken off meanwhile (the run ended)
    schedule.push_back(r, KEYS, [run for run, _ in due], to=80.0)
    assert r.zrange(KEYS.schedule(), 0, -1, withscores=True) == [(b"a", 80.0), (b"c", 99.0)]


def test_stats_count_the_feed_groups_backlog_and_the_dead_letters(store: EventStore, r: redis.Redis) -> None:
    assert stats.feed_groups(r, KEYS) == []  # no feed yet
    store.append(events("run-a", 3))
    GroupReader(r, stream=KEYS.feed(), group="g", consumer="c").ensure_group()
    assert [g.name for g in stats.feed_groups(r, KEYS)] == ["g"]
    assert stats.dead_letter_count(r, KEYS) == 0
    store.dead_letter(source="x", sid="1-1", reason="garbled", fields={b"e": b"?"})
    assert stats.dead_letter_count(r, KEYS) == 1


def test_health_pings_and_says_not_ready_in_words(r: redis.Redis) -> None:
    health.ping(r)
    assert health.answers(r)
    assert health.not_ready(r) is None
    dead = redis.Redis.from_url(DEAD, socket_connect_timeout=1)
    assert not health.answers(dead)
    assert isinstance(health.not_ready(dead), redis.ConnectionError)
    with pytest.raises(StoreUnavailable, match="reach the event log"):
        health.ping(dead, what="reach the event log")


@pytest.mark.parametrize(
    "call",
    [
        lambda c: control.send_control(c, KEYS, "h", {"op": "watch"}, what="register the run with the agent"),
        lambda c: history.newest_first(c, KEYS, "a", count=1, what="read a run's recent events"),
        lambda c: flags.first_request(c, KEYS, "sig", ttl_s=1),
        lambda c: flags.flag_queued(c, KEYS, ["a"], fast=False, ttl_s=1, reclaimed=False),
        lambda c: progress.last_alive(c, KEYS, "dispatcher"),
        lambda c: schedule.due_runs(c, KEYS, time.time(), count=1),
        lambda c: stats.dead_letter_count(c, KEYS),
    ],
)
def test_an_unreachable_redis_is_store_unavailable_from_every_repository(call) -> None:
    with pytest.raises(StoreUnavailable):
        call(redis.Redis.from_url(DEAD, socket_connect_timeout=1))

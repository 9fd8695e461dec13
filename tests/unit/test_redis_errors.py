"""Which Redis errors every daemon rides out (an outage, a restart, a failover) and which it reports."""

from __future__ import annotations

import logging
import threading

import pytest
import redis
from trainwarden.events.errors import StoreError, StoreRefused, StoreUnavailable
from trainwarden.events.loop import run_loop
from trainwarden.events.redis_errors import describe, redis_errors, refusal, transient

TRANSIENT = [
    redis.ConnectionError("Connection refused"),
    redis.TimeoutError("Timeout reading from socket"),
    redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"),
    redis.exceptions.ReadOnlyError("You can't write against a read only replica."),
    redis.exceptions.MasterDownError("Link with MASTER is down"),
    redis.exceptions.TryAgainError("Multiple keys request during rehashing of slot"),
    redis.ResponseError("NOREPLICAS Not enough good replicas to write."),
    redis.ResponseError("UNBLOCKED the client was unblocked because the instance became a replica"),
    redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'"),
    redis.ResponseError("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist"),
    redis.ResponseError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."),
    StoreUnavailable("Redis unreachable"),
]
REFUSED = [
    redis.ResponseError("NOGROUP No such key or consumer group"),
    redis.ResponseError("BUSYGROUP Consumer Group name already exists"),
    redis.exceptions.NoPermissionError("this user has no permissions to run the 'xadd' command"),
]


@pytest.mark.parametrize("exc", TRANSIENT, ids=lambda e: type(e).__name__)
def test_transient_errors_become_store_unavailable(exc: Exception) -> None:
    assert transient(exc)
    if isinstance(exc, redis.RedisError):
        with pytest.raises(StoreUnavailable, match="while trying to read the feed"), redis_errors("read the feed"):
            raise exc


@pytest.mark.parametrize(("exc", "words"), [
    (redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'"), "out of memory"),
    (redis.exceptions.ReadOnlyError("You can't write against a read only replica."), "read-only replica"),
    (redis.ResponseError("MISCONF Redis is configured to save RDB snapshots"), "cannot save to disk"),
    (redis.ResponseError("BUSY Redis is busy running a script."), "busy running a script"),
    (redis.ResponseError("NOREPLICAS Not enough good replicas to write."), "too few replicas"),
], ids=["OOM", "READONLY", "MISCONF", "BUSY", "NOREPLICAS"])  # fmt: skip
def test_refused_writes_are_waited_out_and_named(exc: Exception, words: str) -> None:
    assert refusal(exc) is not None and words in refusal(exc)  # type: ignore[operator]
    with pytest.raises(StoreRefused, match=f"Redis refuses writes: .*{words}"), redis_errors("append events"):
        raise exc
    assert words in describe(exc)


@pytest.mark.parametrize("exc", REFUSED, ids=lambda e: type(e).__name__)
def test_refusals_are_store_errors_not_retried(exc: Exception) -> None:
    assert not transient(exc)
    with pytest.raises(StoreError) as raised, redis_errors("append events"):
        raise exc
    assert not isinstance(raised.value, StoreUnavailable)


def test_other_redis_errors_pass_through() -> None:
    with pytest.raises(redis.WatchError), redis_errors("commit"):
        raise redis.WatchError("moved")


@pytest.mark.parametrize("exc", TRANSIENT, ids=lambda e: type(e).__name__)
def test_run_loop_rides_out_each_transient_error_raw_or_wrapped(exc: Exception) -> None:
    stop = threading.Event()
    calls: list[int | None] = []

    def step(block_ms: int | None) -> int:
        calls.append(block_ms)
        if len(calls) == 1:
            raise exc
        stop.set()
        return 1

    run_loop(step, name="test", burst=False, stop=stop)
    assert len(calls) == 2


def test_run_loop_lets_a_refusal_and_a_bug_through() -> None:
    def refused(block_ms: int | None) -> int:
        raise redis.ResponseError("NOGROUP No such key")

    with pytest.raises(redis.ResponseError):
        run_loop(refused, name="test", burst=False, stop=threading.Event())

    def bug(block_ms: int | None) -> int:
        raise KeyError("x")

    with pytest.raises(KeyError):
        run_loop(bug, name="test", burst=False, stop=threading.Event())


def test_a_refusal_of_writes_ends_only_when_a_step_gets_work_through(caplog: pytest.LogCaptureFixture) -> None:
    """A step that read nothing (and so wrote nothing) does not show that Redis takes writes again: one line
    when the refusal starts, one when it ends, no flapping in between."""
    stop = threading.Event()
    results: list[int | Exception] = [redis.exceptions.OutOfMemoryError("command not allowed"), 0, 0,
                                      redis.exceptions.OutOfMemoryError("command not allowed"), 0, 1]  # fmt: skip

    def step(block_ms: int | None) -> int:
        result = results.pop(0)
        if not results:
            stop.set()
        if isinstance(result, Exception):
            raise result
        return result

    with caplog.at_level(logging.WARNING):
        run_loop(step, name="test", burst=False, stop=stop)
    # run_loop's own lines only: a thread another test left running (a launch waiting out its SSH timeout) may log
    # meanwhile, and caplog takes every logger's records
    lines = [r.getMessage() for r in caplog.records if r.name == "trainwarden.events.loop"]
    assert len(lines) == 2, lines
    assert "Redis refuses writes: out of memory" in lines[0]
    assert "Redis takes writes again" in lines[1]

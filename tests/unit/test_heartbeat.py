"""Heartbeat hashes, silence transitions, the health table, the one-line Redis auth error (pure parts)."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess

import pytest
import redis
from trainwarden.events.errors import StoreAuthFailed, StoreUnavailable
from trainwarden.events.heartbeat import (
    NOT_AN_ERROR,
    Beat,
    Heartbeat,
    LastErrorHandler,
    Liveness,
    decode,
    encode,
    megabytes,
)
from trainwarden.events.keys import Keys
from trainwarden.events.lease import holder_dead
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.silence import entry_lag, transition_seq

from trainwarden.cli.entry import auth_failed
from trainwarden.cli.health import row, table
from trainwarden.settings import Settings

BEAT = Beat(role="worker", host="central", pid=830, version="0.1.0", interval_s=10.0, ts=1000.0, started=900.0,
            lag_s=0.5, lag_of="queue wait", backlog=3, last_error=None, last_error_at=None)  # fmt: skip


def test_encode_decode_round_trip() -> None:
    stored = {k.encode(): v.encode() for k, v in encode(BEAT).items()}
    assert decode(stored) == BEAT
    assert decode({b"role": b"worker"}) is None  # half-written or foreign: ignored, never an error
    assert decode({**stored, b"pid": b"x"}) is None


def test_silent_after_three_intervals() -> None:
    assert not BEAT.silent(1030.0)
    assert BEAT.silent(1030.1)
    assert BEAT.component == "worker@central"


def test_transition_seqs_order_and_agree() -> None:
    silent = transition_seq(1000.0, recovered=False)
    back = transition_seq(1000.0, recovered=True)
    again = transition_seq(1000.000001, recovered=False)
    assert silent < back < again  # the event log keeps a producer's seqs increasing
    assert transition_seq(1000.0, recovered=False) == silent  # every observer names it the same


def test_entry_lag() -> None:
    assert entry_lag([]) == 0.0
    assert entry_lag([("1000000-0", {})], now=1003.5) == pytest.approx(3.5)


def test_table_marks_silent() -> None:
    text = table([row(BEAT, 1000.0 + 41)], 1041.0)
    assert "worker@central" in text and "SILENT" in text and "queue wait" in text
    assert row(BEAT, 1001.0)["status"] == "OK"


def test_last_error_is_masked() -> None:
    beat = Heartbeat(client=None, keys=Keys(), role="agent", host="h", version="0")
    handler = LastErrorHandler(beat)
    handler.emit(logging.LogRecord("x", logging.WARNING, "f", 1, "cannot reach redis://:hunter2pw@db:6379/0", (), None))
    assert beat.last_error is not None and "hunter2pw" not in beat.last_error and "***" in beat.last_error


def test_auth_errors_are_not_outages() -> None:
    with pytest.raises(StoreAuthFailed), redis_errors("read"):
        raise redis.AuthenticationError("invalid username-password pair or user is disabled.")
    with pytest.raises(StoreAuthFailed), redis_errors("read"):
        raise redis.ResponseError("NOAUTH Authentication required.")
    with pytest.raises(StoreUnavailable), redis_errors("read"):
        raise redis.ConnectionError("Connection refused")


def test_auth_failed_is_one_masked_line() -> None:
    settings = Settings(redis_url="redis://tw:hunter2pw@db:6379/0")
    line = auth_failed(StoreAuthFailed("WRONGPASS invalid username-password pair (hunter2pw)"), settings)
    assert "\n" not in line and "hunter2pw" not in line and "redis://tw:***@db:6379/0" in line
    assert "invalid username-password pair" in line


def test_a_component_stopped_on_purpose_is_never_silent() -> None:
    stopped = dataclasses.replace(BEAT, stopped_at=1000.0)
    assert decode({k.encode(): v.encode() for k, v in encode(stopped).items()}) == stopped
    assert not stopped.silent(1000.0 + 10 * 3600) and BEAT.silent(1000.0 + 31)
    assert row(stopped, 5000.0)["status"] == "STOPPED"


def test_liveness_holds_through_a_declared_wait_and_not_past_it() -> None:
    now = [0.0]
    alive = Liveness(stale_s=3.0, clock=lambda: now[0])
    now[0] = 2.0
    assert alive.alive() and alive.notice is None
    with alive.waiting("waiting out Slack's Retry-After 30 s", 30.0):
        now[0] = 31.0
        assert alive.alive() and alive.notice == "waiting out Slack's Retry-After 30 s"
        now[0] = 36.0  # the wait overran what it declared (and the margin): the loop is stuck
        assert not alive.alive()
    assert alive.alive() and alive.notice is None  # the wait ended: progress
    now[0] = 40.0
    assert not alive.alive()  # no progress, nothing declared


def test_a_dead_lease_holder_is_one_of_this_host_whose_process_is_gone() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert holder_dead(f"here:{gone.pid}:ab12cd34", host="here")
    assert not holder_dead(f"here:{os.getpid()}:ab12cd34", host="here")  # alive
    assert not holder_dead(f"there:{gone.pid}:ab12cd34", host="here")  # another host: only its lease's expiry says
    assert not holder_dead("garbage", host="here")


def test_news_of_a_recovery_leaves_the_last_error_and_an_error_is_due_at_once() -> None:
    beat = Heartbeat(client=None, keys=Keys(), role="agent", host="h", version="1")
    handler = LastErrorHandler(beat)
    error = logging.LogRecord("x", logging.ERROR, "f", 1, "cannot write the spool: [Errno 28]", None, None)
    handler.emit(error)
    news = logging.LogRecord("x", logging.WARNING, "f", 1, "Redis reachable again after 4.0s", None, None)
    news.__dict__.update(NOT_AN_ERROR)
    handler.emit(news)
    assert beat.last_error == "cannot write the spool: [Errno 28]"
    assert beat.due == 0.0


def test_megabytes() -> None:
    assert megabytes(5 * 2**20) == "5 MB"
    assert megabytes(2**19) == "0.5 MB"

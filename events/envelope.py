"""The event envelope: one immutable record per thing that happened.

An event id is `<producer>:<seq>`. A producer (an agent's log tail, a worker evaluating a run)
numbers its events with a strictly increasing `seq`; the store keeps, per run and producer, the
highest seq it has stored, so an append retried after a timeout, or replayed from a spool, is a
no-op. Producers that must be deterministic across retries derive `seq` from their input (a log
offset, an output counter in a checkpoint); others use `time_seq()`.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainwarden.core.limits import MAX_HOST_CHARS
from trainwarden.events.errors import EnvelopeError

ENVELOPE_VERSION = 1

RUN_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
PRODUCER_RE = re.compile(r"^[A-Za-z0-9_.@/+-]{1,200}$")
TYPE_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")


@dataclass(frozen=True, slots=True)
class Event:
    """An immutable fact about one run; `data` holds the type-specific fields."""

    id: str
    type: str
    run: str
    host: str
    ts: float
    seq: int
    data: dict[str, Any] = field(default_factory=dict)
    v: int = ENVELOPE_VERSION

    @property
    def producer(self) -> str:
        return self.id.rpartition(":")[0]


def check_run_name(run: str) -> str:
    """Run names end up in Redis keys, tmux session names and file paths: keep them boring."""
    if not isinstance(run, str) or not RUN_NAME_RE.match(run):
        raise EnvelopeError(
            f"invalid run name {run!r}: use 1-100 characters from letters, digits, '_', '.', '-', "
            "starting with a letter or digit"
        )
    return run


def make_event(
    event_type: str,
    *,
    run: str,
    host: str,
    producer: str,
    seq: int,
    data: Mapping[str, Any] | None = None,
    ts: float | None = None,
) -> Event:
    """Build a validated event; raises EnvelopeError naming the bad field.

    `data` must be a dict: typed as a Mapping so that a payload TypedDict (events/payloads/) is
    accepted as it is, without a copy.
    """
    names = (event_type, run, producer, host)
    if names not in _VALID_NAMES:
        _check_names(event_type, run, producer, host)
        if len(_VALID_NAMES) < _VALID_NAMES_MAX:
            _VALID_NAMES.add(names)  # a producer makes many events with the same names: check them once
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise EnvelopeError(f"seq must be a non-negative integer, got {seq!r}", run=run)
    if data is None:
        data = {}
    elif not isinstance(data, dict):
        raise EnvelopeError(f"data must be a dict, got {type(data).__name__}", run=run)
    return Event(
        id=f"{producer}:{seq}",
        type=event_type,
        run=run,
        host=host,
        ts=time.time() if ts is None else float(ts),
        seq=seq,
        data=data,
    )


_VALID_NAMES: set[tuple[str, str, str, str]] = set()
_VALID_NAMES_MAX = 100_000


def _check_names(event_type: str, run: str, producer: str, host: str) -> None:
    if not isinstance(event_type, str) or not TYPE_RE.match(event_type):
        raise EnvelopeError(f"invalid event type {event_type!r}: expected dotted lowercase words like 'anomaly.opened'")
    check_run_name(run)
    if not isinstance(producer, str) or not PRODUCER_RE.match(producer):
        raise EnvelopeError(f"invalid producer {producer!r}: expected 1-200 characters from [A-Za-z0-9_.@/+-]")
    if not isinstance(host, str) or not host or len(host) > MAX_HOST_CHARS:
        raise EnvelopeError(f"host must be a string of 1-{MAX_HOST_CHARS} characters, got {host!r:.80}", run=run)


class _TimeSeq:
    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def __call__(self) -> int:
        now = time.time_ns() // 1000
        with self._lock:
            self._last = max(now, self._last + 1)
            return self._last


time_seq = _TimeSeq()
"""A process-wide strictly increasing seq from the wall clock (microseconds).

Good for producers that restart (the bot, CLI commands): a new process starts above the old
one's numbers as long as the clock does not go backwards by more than the restart took.
"""

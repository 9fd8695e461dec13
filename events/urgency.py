"""Which events can only mean trouble: they take the workers' fast lane (workers/dispatcher.py).

The append script marks a feed entry `u=1` when it stored one of them, so that the dispatcher sends
the run's job at once to the priority queue instead of behind the backlog of routine metrics. Pure,
and cheap on the common case (a finite metric costs one pass over its values): the agent's
publisher classifies every event it appends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from trainwarden.events import types as t
from trainwarden.events.dispatch import Dispatch
from trainwarden.events.envelope import Event
from trainwarden.faults import signature_of

CRITICAL = "critical"  # the severity of a fault signature or an XID that stops a run
BY_POLICY = "policy"  # a stop.requested the workers wrote themselves (they are carrying it out already)


_URGENT: Dispatch[Callable[[Event], bool]] = Dispatch("the fast lane")


def is_urgent(event: Event) -> bool:
    """True for a non-finite metric value, a critical fault line or XID, a stop a person asked for, a failed run."""
    test = _URGENT.handlers.get(event.type)
    return test is not None and test(event)


@_URGENT.on(t.METRIC)
def _metric(event: Event) -> bool:
    return _non_finite(event.data)


@_URGENT.on(t.RUN_FAILED)
def _failed(event: Event) -> bool:
    return True


@_URGENT.on(t.STOP_REQUESTED)
def _asked(event: Event) -> bool:
    return event.data.get("by") != BY_POLICY


@_URGENT.on(t.LOG_LINE)
def _fault_line(event: Event) -> bool:
    line, tag = event.data.get("line"), event.data.get("tag")
    if not isinstance(line, str) or not isinstance(tag, str):
        return False
    signature = signature_of(line, tag)
    return signature is not None and signature.severity == CRITICAL


@_URGENT.on(t.GPU_XID)
def _xid(event: Event) -> bool:
    return event.data.get("severity") == CRITICAL


def urgency_marks(events: Sequence[Event]) -> str:
    """One '1' or '0' per event, for the append script; '' when none is urgent (the common case)."""
    marks = ["1" if is_urgent(e) else "0" for e in events]
    return "".join(marks) if "1" in marks else ""


def _non_finite(data: Any) -> bool:
    """A NaN or an infinity among a metric's values (nested dicts too: some trainers log groups)."""
    for value in data.values():
        if type(value) is float:
            if not math.isfinite(value):
                return True
        elif isinstance(value, dict) and _non_finite(value):
            return True
    return False

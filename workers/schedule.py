"""Ticks: scheduled evaluations of quiet runs, recorded in the log so that replay sees them.

Time-driven rules (`absence`, `for: 10m`) must fire even when nothing arrives, yet decisions must
come from the log alone. So the worker, at each commit, sets the run's next-tick time in one
sorted set (`tw:schedule`, run -> wall-clock due time); the dispatcher appends a `tick` event to
every run that is due, which dispatches a job like any other event. The engine takes its time
from the tick's `ts`, and `replay --verify` re-evaluates ticks like any other input.

Volume is bounded: a run that keeps sending events is never ticked (each job pushes its due time
forward); a quiet run gets at most one tick per interval (default 1/min in the startup phase,
1/15 min after); a run that is finished, failed, stopped or decided STOP gets none; and a run
silent for `max_silence_s` (event time, default 24 h) stops being ticked until it sends again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.payloads import TickData
from trainwarden.events.schedule import due_runs, push_back
from trainwarden.events.store import EventStore
from trainwarden.policies.engine import in_startup
from trainwarden.policies.model import Policy
from trainwarden.workers import config
from trainwarden.workers.checkpoint import Checkpoint, awaiting_due

log = logging.getLogger(__name__)

ENDED_STATUSES = frozenset({"stopping", "stopped", "finished", "failed"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TickSettings:
    startup_s: float = config.TICK_STARTUP_S
    steady_s: float = config.TICK_STEADY_S
    max_silence_s: float = config.TICK_MAX_SILENCE_S


def next_tick(cp: Checkpoint, policy: Policy, ticks: TickSettings, *, wall_now: float) -> float | None:
    """When to look at the run again if nothing arrives; None: not at all (it ended, or went silent)."""
    ps = cp.policy
    awaiting = awaiting_due(cp.pending)
    if awaiting is not None:
        return awaiting  # a stop the agent carries out: look again if it has not reported by then
    if cp.guard is not None and not cp.guard.get("requested") and cp.guard.get("deadline") is not None:
        return cp.guard["deadline"]  # a guarded stop: look again when nobody has answered in time
    if ps.ended or ps.decision == t.STOP or cp.run.status in ENDED_STATUSES or ps.start is None or ps.now is None:
        return None
    if ps.last_input is not None and ps.now - ps.last_input > ticks.max_silence_s:
        return None
    return wall_now + (ticks.startup_s if in_startup(policy, ps) else ticks.steady_s)


def tick_producer(run: str) -> str:
    return f"tick/{run}"


class Ticker:
    """The dispatcher's half: append a `tick` to each run that is due, then push its due time back
    by `retry_s` (the job it causes sets the real next one)."""

    def __init__(
        self, *, store: EventStore, host: str, retry_s: float, clock: Callable[[], float] = time.time,
        batch: int = 500,
    ) -> None:  # fmt: skip
        self.store = store
        self.host = host
        self.retry_s = retry_s
        self.clock = clock
        self.batch = batch

    def step(self) -> int:
        now = self.clock()
        due = due_runs(self.store.redis, self.store.keys, now, count=self.batch)
        if not due:
            return 0
        # seq from the due time: two dispatchers (or a retry) ticking the same due time append once.
        events = [
            make_event(t.TICK, run=run.decode(), host=self.host, producer=tick_producer(run.decode()),
                       seq=int(score * 1000), data=TickData(due=float(score)), ts=now)
            for run, score in due
        ]  # fmt: skip
        self.store.append(events)
        push_back(self.store.redis, self.store.keys, [run for run, _ in due], to=now + self.retry_s)
        log.debug("ticked %d quiet runs", len(events))
        return len(events)

"""How each kind of pending action (workers/pending.py) is carried out: one performer per record class.

The records are pure and cheap to import (the evaluation builds them); their performers reach SSH,
Redis and the disk (workers/actions.py), so they are registered here, by class, with `@performs`.
tests/unit/test_pending_actions.py checks every declared kind has one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.payloads import ResumeSkippedData
from trainwarden.events.store import Malformed
from trainwarden.remote import agent_stop
from trainwarden.workers import breaker, pending
from trainwarden.workers.actions import (
    action_producer,
    build_evidence,
    chart_anomaly,
    resume_run,
    stop_by_agent,
    stop_run,
)
from trainwarden.workers.checkpoint import Checkpoint
from trainwarden.workers.context import WorkerContext
from trainwarden.workers.dump_request import add_stacks, request_dump
from trainwarden.workers.errors import UnknownAction
from trainwarden.workers.pending import (
    AddStacks,
    Awaiting,
    BuildEvidence,
    ChartAnomaly,
    PendingAction,
    RequestDump,
    Resume,
    StopRun,
)

log = logging.getLogger(__name__)

__all__ = ["PERFORMERS", "Awaiting", "Job", "Outcome", "perform", "performs"]

Outcome = Event | Awaiting | None


@dataclass(frozen=True, slots=True)
class Job:
    """What a performer works with: the run, its checkpoint, the log entry that asked for the action."""

    ctx: WorkerContext
    run: str
    cp: Checkpoint
    source: Event
    producer: str  # the action's result is recorded under it (seq 1): a repeat appends nothing
    now: float

    def event(self, event_type: str, data: Mapping[str, Any]) -> Event:
        return make_event(event_type, run=self.run, host=self.ctx.host, producer=self.producer, seq=1, data=data,
                          ts=self.now)  # fmt: skip


_A = TypeVar("_A", bound=PendingAction)
# record class (workers/pending.py) -> how it is carried out; a test checks every kind has one
PERFORMERS: dict[type[PendingAction], Callable[[Job, Any], Outcome]] = {}


def performs(cls: type[_A]) -> Callable[[Callable[[Job, _A], Outcome]], Callable[[Job, _A], Outcome]]:
    def register(fn: Callable[[Job, _A], Outcome]) -> Callable[[Job, _A], Outcome]:
        PERFORMERS[cls] = fn
        return fn

    return register


def perform(ctx: WorkerContext, run: str, cp: Checkpoint, action: Mapping[str, Any], *, now: float) -> Outcome:
    """Carry out one pending action (its stored form); returns the event recording its result, or `Awaiting`
    while another process (the agent stopping a watched run) carries it out."""
    try:
        typed = pending.from_dict(action)
    except UnknownAction as exc:
        log.error("%s: dropping it from %s's pending actions", exc, run)
        return None
    source = ctx.store.get(run, typed.sid)
    if source is None or isinstance(source, Malformed):
        log.error("pending %s action for %s refers to missing entry %s; dropping it", typed.kind, run, typed.sid)
        return None
    job = Job(ctx=ctx, run=run, cp=cp, source=source, producer=action_producer(run, typed.sid), now=now)
    return PERFORMERS[type(typed)](job, typed)


@performs(BuildEvidence)
def _evidence(job: Job, action: BuildEvidence) -> Outcome:
    return job.event(*build_evidence(job.ctx, job.cp, job.source))


@performs(StopRun)
def _stop(job: Job, action: StopRun) -> Outcome:
    if action.sent is None:  # not yet handed to an agent: the breaker may hold it
        held = breaker.check(job.ctx, job.source, job.cp.run, run_host=job.cp.run.host or job.ctx.host, now=job.now)
        if held is not None:
            log.warning("stop breaker: holding the STOP of %s by %s (%s); a person releases it with "
                        "`trainwarden stop %s`", job.run, held["rule"], breaker.why(held), job.run)  # fmt: skip
            return job.event(t.STOP_HELD, held)
    watched = job.cp.run.watched
    if watched is not None and agent_stop.stop_means(job.cp.run.launch, watched) == agent_stop.AGENT:
        return stop_by_agent(job.ctx, watched, job.source, action, producer=job.producer, now=job.now)
    return job.event(*stop_run(job.ctx, job.run, job.cp, job.source))


@performs(Resume)
def _resume(job: Job, action: Resume) -> Outcome:
    skipped = resume_run(job.ctx, job.run, job.cp, job.source, action.sid)
    if skipped is None:
        return None  # relaunched: the launcher recorded run.launched (attempt n+1, resumed_after)
    why: ResumeSkippedData = {"reason": skipped.reason, "fix": skipped.fix, "failure": job.source.id,
                              "attempts": int(job.cp.run.launch.get("attempt", 1))}  # fmt: skip
    return job.event(t.RESUME_SKIPPED, why)


@performs(RequestDump)
def _dump(job: Job, action: RequestDump) -> Outcome:
    """The agent records the outcome (process.dump); nothing to append here."""
    request_dump(job.ctx, job.source, action.sid, host=action.host or job.cp.run.host or job.ctx.host, now=job.now)
    return None


@performs(AddStacks)
def _stacks(job: Job, action: AddStacks) -> Outcome:
    add_stacks(Path(action.pack), job.source)  # rewritten in place: safe to repeat
    return None


@performs(ChartAnomaly)
def _chart(job: Job, action: ChartAnomaly) -> Outcome:
    charted = chart_anomaly(job.ctx, job.cp, job.source)
    return None if charted is None else job.event(t.ANOMALY_CHARTED, charted)

"""Pure evaluation step: checkpoint + new log entries -> events to append, dead letters, new checkpoint."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from trainwarden.core.words import shorten
from trainwarden.events import types as t
from trainwarden.events.backend import EventLog
from trainwarden.events.codec import FIELD_BYTES, encode
from trainwarden.events.dispatch import Dispatch
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.payloads import (
    AnomalyOpenedData,
    DecisionData,
    StopCancelledData,
    StopHeldData,
    StopRequestedData,
)
from trainwarden.events.projection import apply
from trainwarden.events.store import Malformed
from trainwarden.policies.durations import fmt_duration
from trainwarden.policies.engine import apply_policy, evaluate
from trainwarden.policies.model import CRITICAL, Policy
from trainwarden.workers.checkpoint import Checkpoint
from trainwarden.workers.dump_request import asks_dump
from trainwarden.workers.evidence import triggering_metric
from trainwarden.workers.pending import AddStacks, BuildEvidence, ChartAnomaly, RequestDump, Resume, StopRun

# Read back from the log, these may become pending actions (workers/pending.py's records, stored as dicts) or
# settle a guarded stop: (checkpoint, entry id, event, stopped by us before this event, policy).
ReadBack = Callable[[Checkpoint, str, Event, bool, Policy], None]
_READ_BACK: Dispatch[ReadBack] = Dispatch("the workers' read-back")


@dataclass(slots=True)
class Step:
    outputs: list[Event] = field(default_factory=list)
    dead: list[Malformed] = field(default_factory=list)


def evaluator_producer(run: str) -> str:
    return f"eval/{run}"


def evaluate_entries(
    policy: Policy,
    cp: Checkpoint,
    entries: Sequence[tuple[str, Event | Malformed]],
    *,
    run: str,
    host: str,
    now: float,
) -> Step:
    """Fold `entries` into `cp` (in place) and collect what must be appended with it.

    Side effects are not performed here: a STOP decision or a stop request read from the log
    becomes a pending action in the checkpoint, carried out after the commit. When `policy` is not
    the one that evaluated the run so far, a `policy.applied` event records from which entry on it
    does, so `trainwarden replay --verify` can re-evaluate each entry with the policy that did.
    """
    step = Step()
    producer = evaluator_producer(run)
    switch = [] if not entries or cp.policy.policy == policy.hash else apply_policy(policy, cp.policy)
    for outcome in switch:
        data = {**outcome.data, "from": entries[0][0]} if outcome.type == t.POLICY_APPLIED else outcome.data
        cp.emitted += 1
        step.outputs.append(make_event(outcome.type, run=run, host=host, producer=producer, seq=cp.emitted, data=data,
                                       ts=now))  # fmt: skip
    for sid, item in entries:
        if isinstance(item, Malformed):
            step.dead.append(item)
            continue
        try:
            _fold_one(policy, cp, step, sid, item, run=run, host=host, now=now)
        except Exception as exc:  # a payload the engine cannot read: that entry is dead-lettered, the run goes on
            reason = shorten(f"cannot be evaluated: {type(exc).__name__}: {exc}", 500)
            step.dead.append(Malformed(sid=sid, reason=reason, fields={FIELD_BYTES: encode(item)}))
    if entries:
        cp.after = entries[-1][0]
    return step


Entries = list[tuple[str, Event | Malformed]]


def evaluate_next(
    log: EventLog, policy: Policy, cp: Checkpoint, *, run: str, host: str, clock: Callable[[], float], count: int
) -> tuple[Entries, Step, float] | None:
    """The next page of `run`'s log after `cp.after` (on any backend), `evaluate_entries` over it, and the time it
    was evaluated at; None when there is nothing after it (the clock is read only when there is). Appending the
    step is the caller's: the workers queue it on their checkpoint's transaction (workers/process.py)."""
    entries = log.read(run, after=cp.after, count=count)
    if not entries:
        return None
    now = clock()
    return entries, evaluate_entries(policy, cp, entries, run=run, host=host, now=now), now


def _fold_one(policy: Policy, cp: Checkpoint, step: Step, sid: str, event: Event, *, run: str, host: str,
              now: float) -> None:  # fmt: skip
    """One event into `cp` and `step`; raises whatever a payload of the wrong shape makes the engine raise."""
    producer = evaluator_producer(run)
    run_state, policy_state = cp.run, cp.policy
    stopped_by_us = run_state.status in ("stopping", "stopped")
    apply(run_state, event)
    read_back = _READ_BACK.handlers.get(event.type)
    if read_back is not None:
        read_back(cp, sid, event, stopped_by_us, policy)
    guard = cp.guard
    deadline = guard.get("deadline") if guard is not None else None  # a held STOP has none: a person decides
    if guard is not None and deadline is not None and not guard.get("requested") and event.ts >= deadline:
        # nobody answered in time: the workers stop the run, whether or not the bot is up
        guard["requested"] = True
        cp.emitted += 1
        reason = f"no answer within {fmt_duration(guard['confirm_s'])}: {guard['reason']}"
        unanswered: StopRequestedData = {
            "by": "policy", "rule": guard["rule"], "reason": reason, "decision": guard["decision"],
            "run_host": run_state.host or host,
        }  # fmt: skip
        step.outputs.append(make_event(t.STOP_REQUESTED, run=run, host=host, producer=producer, seq=cp.emitted,
                                       data=unanswered, ts=now))  # fmt: skip
    outcomes = evaluate(policy, policy_state, event)
    for outcome in outcomes:
        data = {**outcome.data, "run_host": run_state.host or event.host}
        cp.emitted += 1
        out = make_event(outcome.type, run=run, host=host, producer=producer, seq=cp.emitted, data=data, ts=now)
        step.outputs.append(out)
        if _fault_under_hold(cp, policy, outcome.type, data):  # its STOP is held, and now a NaN: no breaker for it
            guard = cast(dict[str, Any], cp.guard)
            guard["requested"] = True
            cp.emitted += 1
            fault: StopRequestedData = {"by": "policy", "rule": data["rule"], "reason": data["reason"],
                                        "decision": guard["decision"], "run_host": data["run_host"]}  # fmt: skip
            step.outputs.append(make_event(t.STOP_REQUESTED, run=run, host=host, producer=producer, seq=cp.emitted,
                                           data=fault, ts=now))  # fmt: skip
        if outcome.type == t.DECISION and data["decision"] == t.STOP and not data.get("confirm_s"):
            cp.emitted += 1
            request: StopRequestedData = {"by": "policy", "rule": data["rule"], "reason": data["reason"],
                                          "decision": out.id, "run_host": data["run_host"]}  # fmt: skip
            step.outputs.append(
                make_event(t.STOP_REQUESTED, run=run, host=host, producer=producer, seq=cp.emitted,
                           data=request, ts=now)
            )  # fmt: skip


def _fault_under_hold(cp: Checkpoint, policy: Policy, event_type: str, data: dict[str, Any]) -> bool:
    """Whether `data` is a fault rule's STOP anomaly opening on a run whose earlier STOP the breaker holds: the
    decision is STOP already (no new one is recorded), so the fault's stop is asked for here."""
    guard = cp.guard
    if guard is None or not guard.get("held") or guard.get("requested") or event_type != t.ANOMALY_OPENED:
        return False
    if data.get("decision") != t.STOP or data.get("shadow"):
        return False
    return any(r.id == data.get("rule") and r.fault for r in policy.rules)


@_READ_BACK.on(t.STOP_REQUESTED)
def _stop_requested(cp: Checkpoint, sid: str, event: Event, stopped_by_us: bool, policy: Policy) -> None:
    cp.pending.append(StopRun(sid=sid, id=event.id).to_dict())
    guard, asked = cp.guard, cast(StopRequestedData, event.data)
    if guard is None:
        return
    released = bool(guard.get("held")) and asked.get("by") not in (None, "policy")
    if asked.get("decision") == guard["decision"] or released:
        cp.guard = None  # Stop now (or the deadline), or a person's stop of a held run: the usual stop path


@_READ_BACK.on(t.STOP_HELD)
def _stop_held(cp: Checkpoint, sid: str, event: Event, stopped_by_us: bool, policy: Policy) -> None:
    """The breaker held the STOP (workers/breaker.py): a guard with no deadline, settled by a person's stop
    (Release) or Keep running (Cancel), as a guarded stop's."""
    held = cast(StopHeldData, event.data)
    cp.guard = {"decision": held.get("decision"), "rule": held.get("rule"), "reason": held.get("reason"),
                "confirm_s": 0, "deadline": None, "held": event.id}  # fmt: skip


@_READ_BACK.on(t.STOP_CANCELLED)
def _stop_cancelled(cp: Checkpoint, sid: str, event: Event, stopped_by_us: bool, policy: Policy) -> None:
    guard = cp.guard
    if guard is not None and cast(StopCancelledData, event.data).get("decision") == guard["decision"]:
        cp.guard = None  # Keep running


@_READ_BACK.on(t.RUN_FAILED)
def _run_failed(cp: Checkpoint, sid: str, event: Event, stopped_by_us: bool, policy: Policy) -> None:
    # the projection marks the run failed only when this is the end of its current launch
    if cp.run.status == "failed" and cp.run.launch.get("resumable") and not stopped_by_us:
        cp.pending.append(Resume(sid=sid, id=event.id).to_dict())


@_READ_BACK.on(t.ANOMALY_OPENED)
def _anomaly_opened(cp: Checkpoint, sid: str, event: Event, stopped_by_us: bool, policy: Policy) -> None:
    opened = cast(AnomalyOpenedData, event.data)
    # a shadow rule's is not posted; a log line's has no metric to draw
    metric = triggering_metric(opened.get("values") or {}, list(cp.run.recent_metrics))
    if opened.get("severity") == CRITICAL and not opened.get("shadow") and metric is not None:
        cp.pending.append(ChartAnomaly(sid=sid, id=event.id, rule=opened.get("rule")).to_dict())
    if asks_dump(policy, opened):  # where it is stuck, recorded by the run's agent (once per opening)
        cp.pending.append(RequestDump(sid=sid, id=event.id, host=opened.get("run_host")).to_dict())


@_READ_BACK.on(t.PROCESS_DUMP)
def _process_dump(cp: Checkpoint, sid: str, event: Event, stopped_by_us: bool, policy: Policy) -> None:
    """A STOP's pack takes its stacks; a pack written already gets them now."""
    cp.dump = sid
    if cp.run.evidence:
        cp.pending.append(AddStacks(sid=sid, id=event.id, pack=cp.run.evidence[-1]).to_dict())


@_READ_BACK.on(t.DECISION)
def _decision(cp: Checkpoint, sid: str, event: Event, stopped_by_us: bool, policy: Policy) -> None:
    data = cast(DecisionData, event.data)
    if data.get("decision") != t.STOP:
        return
    # The STOP's pack has the chart: an anomaly not charted yet (its rule's, or one beside it such as
    # grad_norm=nan with loss=nan) gets no second one: one NaN, one chart on the phone.
    cp.pending = [a for a in cp.pending if a["kind"] != ChartAnomaly.kind]
    cp.pending.append(BuildEvidence(sid=sid, id=event.id).to_dict())
    confirm_s = data.get("confirm_s")
    if confirm_s:
        cp.guard = {"decision": event.id, "rule": data.get("rule"), "reason": data.get("reason"),
                    "confirm_s": confirm_s, "deadline": event.ts + confirm_s}  # fmt: skip

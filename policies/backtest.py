"""Backtest: run a policy over a recorded history and say when each rule would have fired, the
decision timeline, and for a STOP how much earlier the run would have ended. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.policies.engine import PolicyState, apply_policy, evaluate
from trainwarden.policies.model import Outcome, Policy


@dataclass(frozen=True, slots=True)
class Moment:
    """Something the policy said, when, and at which training step."""

    ts: float
    step: Any
    rule: str | None
    what: str  # the decision, or the rule's severity for a firing
    reason: str
    seq: int = 0  # the `seq` of the event that caused it (in a log: the byte offset of its line's end)
    epoch: Any = None  # the latest epoch a metric said, if any
    confirm_s: float = 0.0  # a STOP that waits this long for a person (a confirm-STOP), asked at this moment


@dataclass(slots=True)
class Backtest:
    policy: Policy
    events: int = 0
    first_ts: float | None = None  # the run's first and last activity (events/types.py ACTIVITY_TYPES)
    last_ts: float | None = None
    first_step: Any = None
    last_step: Any = None
    metrics: int = 0  # metric events read: none means the policy judged nothing
    firings: list[Moment] = field(default_factory=list)
    timeline: list[Moment] = field(default_factory=list)
    outcomes: list[Event] = field(default_factory=list)  # what the workers would have appended, as events
    stop_end: tuple[float | None, Any] | None = None  # (ts, step) the STOP's launch ended at, when the name was
    # launched again after it: the next launch's time is not what the STOP would have saved

    @property
    def stop(self) -> Moment | None:
        return next((m for m in self.timeline if m.what == t.STOP), None)

    def saved(self, gpus: float = 1.0) -> tuple[Any, float, float] | None:
        """(steps, minutes, GPU-hours) between the STOP and the run's end; None without a STOP."""
        stop = self.stop
        end_ts, end_step = self.stop_end or (self.last_ts, self.last_step)
        if stop is None or end_ts is None:
            return None
        steps = (end_step - stop.step) if isinstance(end_step, int) and isinstance(stop.step, int) else None
        minutes = max(0.0, (end_ts - stop.ts) / 60)
        return steps, minutes, minutes / 60 * gpus


def backtest(policy: Policy, events: Iterable[Event]) -> Backtest:
    result = Backtest(policy=policy)
    state = PolicyState()
    apply_policy(policy, state)
    epoch: Any = None
    for event in events:
        if event.type not in policy.index.input_types and event.type not in (t.RUN_LAUNCHED, *_ENDS):
            continue
        result.events += 1
        if event.type == t.RUN_LAUNCHED and result.stop_end is None and result.stop is not None:
            result.stop_end = (result.last_ts, result.last_step)
        if event.type in t.ACTIVITY_TYPES:  # the run's span is its activity, not the heartbeats after its end
            result.first_ts = event.ts if result.first_ts is None else result.first_ts
            result.last_ts = event.ts
        step = event.data.get("step") if event.type == t.METRIC else None
        if event.type == t.METRIC:
            result.metrics += 1
            epoch = event.data.get("epoch", epoch)
        if isinstance(step, int):
            result.first_step = step if result.first_step is None else result.first_step
            result.last_step = step
        for out in _shadows(evaluate(policy, state, event), result, event, state):
            d = out.data
            n = len(result.outcomes) + 1
            result.outcomes.append(
                Event(f"{_PRODUCER}:{n}", out.type, event.run, event.host, event.ts, seq=n, data=dict(d))
            )
            if out.type == t.ANOMALY_OPENED:
                result.firings.append(
                    Moment(event.ts, state.step, d["rule"], d["severity"], d["reason"], event.seq, epoch)
                )
            elif out.type == t.DECISION:
                confirm = float(d.get("confirm_s") or 0.0)  # a confirm-STOP counts where it was asked
                result.timeline.append(
                    Moment(event.ts, state.step, d.get("rule"), d["decision"], d["reason"], event.seq, epoch, confirm)
                )
    return result


_PRODUCER = "backtest/policy"
_ENDS = (t.RUN_FINISHED, t.RUN_FAILED, t.STOP_DONE)


def _shadows(outs: Iterable[Outcome], result: Backtest, event: Event, state: PolicyState) -> Iterator[Outcome]:
    """The engine's outcomes, with what rules in shadow mode would have decided put in the timeline (shown,
    never the backtest's STOP)."""
    for out in outs:
        if out.type == t.DECISION_SHADOW:
            d = out.data
            result.timeline.append(Moment(event.ts, state.step, d["rule"], f"WOULD-{d['decision']}", d["reason"]))
        yield out

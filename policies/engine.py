"""Incremental evaluation: `evaluate(policy, state, event)` -> what to append. Pure; the caller owns I/O.

Semantics (the training-check method): STOP > WAIT > CONTINUE; a STOP is final for the run's
current launch; an anomaly is opened once per (run, rule) while it stays open and resolved when
the rule stops firing; every output names the event that triggered it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from events import types as t
from events.envelope import Event
from policies.model import Finding, Outcome, Policy, Rule

# Events the policy looks at; its own outputs and the workers' bookkeeping are skipped.
INPUT_TYPES = frozenset(
    {t.METRIC, t.GPU, t.HEALTH, t.LOG_LINE, t.SOURCE_STATUS, t.AGENT_HEARTBEAT, t.RUN_STARTED, t.RUN_FINISHED,
     t.RUN_FAILED}
)  # fmt: skip


@dataclass(slots=True)
class PolicyState:
    decision: str | None = None
    open: dict[str, str] = field(default_factory=dict)  # rule id -> id of the anomaly.opened trigger

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "open": dict(self.open)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PolicyState:
        return cls(decision=data.get("decision"), open=dict(data.get("open", {})))


def evaluate(policy: Policy, state: PolicyState, event: Event) -> list[Outcome]:
    """Advance `state` (in place) by one event and return the outcomes to append, in order."""
    if event.type == t.RUN_LAUNCHED:
        state.decision = None
        state.open.clear()
        return []
    if event.type not in INPUT_TYPES:
        return []
    out: list[Outcome] = []
    firing: list[tuple[Rule, Finding]] = []
    for rule in policy.rules:
        finding = rule.check(event)
        if finding is None:
            continue
        if finding.firing:
            firing.append((rule, finding))
            if rule.id not in state.open:
                state.open[rule.id] = event.id
                out.append(Outcome(t.ANOMALY_OPENED, _anomaly(rule, finding, event, policy)))
        elif rule.id in state.open:
            opened_by = state.open.pop(rule.id)
            out.append(
                Outcome(t.ANOMALY_RESOLVED, {"rule": rule.id, "trigger": event.id, "opened_by": opened_by,
                                              "values": finding.values, "policy": policy.hash})
            )  # fmt: skip
    out.extend(_decide(policy, state, event, firing))
    return out


def _decide(policy: Policy, state: PolicyState, event: Event, firing: list[tuple[Rule, Finding]]) -> list[Outcome]:
    if state.decision == t.STOP:
        return []
    strongest: tuple[Rule, Finding] | None = None
    for rule, finding in firing:
        if rule.decision is None:
            continue
        if strongest is None or t.DECISION_RANK[rule.decision] > t.DECISION_RANK[strongest[0].decision or t.CONTINUE]:
            strongest = (rule, finding)
    if strongest is not None:
        rule, finding = strongest
        decision = rule.decision or t.CONTINUE
        if decision == state.decision:
            return []
        state.decision = decision
        return [
            Outcome(t.DECISION, {"decision": decision, "rule": rule.id, "reason": finding.reason,
                                 "values": finding.values, "severity": rule.severity, "remedy": rule.remedy,
                                 "trigger": event.id, "policy": policy.hash})
        ]  # fmt: skip
    if state.decision is None and event.type == t.METRIC:
        state.decision = t.CONTINUE
        return [
            Outcome(t.DECISION, {"decision": t.CONTINUE, "rule": None, "reason": "healthy",
                                 "trigger": event.id, "policy": policy.hash})
        ]  # fmt: skip
    return []


def _anomaly(rule: Rule, finding: Finding, event: Event, policy: Policy) -> dict[str, Any]:
    return {
        "rule": rule.id,
        "severity": rule.severity,
        "reason": finding.reason,
        "values": finding.values,
        "remedy": rule.remedy,
        "decision": rule.decision,
        "trigger": event.id,
        "policy": policy.hash,
    }

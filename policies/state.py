"""What the engine remembers about a run and each of its rules: plain JSON-serialisable records, saved in
the worker checkpoint (policies/engine.py moves them forward)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class RuleState:
    """What the engine remembers about one rule for one run; saved in the worker checkpoint.

    A checkpoint written before these fields had names (`k`, `c`, `n`, `esc`, `open`, `resolved`)
    is read as well (`from_dict`), so upgrading the workers does not lose a run's windows.
    """

    sig: str  # digest of the rule's parameters: a rule whose parameters changed starts its window over
    kind_state: dict[str, Any]  # the kind's own JSON-serialisable window and counters (Kind.initial/observe)
    holding: bool = False  # the condition held at the last event that told something about it
    since: float | None = None  # ts from which it has held
    samples: int = 0  # events in a row at which it held
    opened_by: str | None = None  # id of the event that opened the rule's anomaly; None while not open
    escalated: bool = False  # its `escalate` decision has been asked for (once per anomaly)
    resolved_at: float | None = None  # ts its last anomaly resolved (for `cooldown`)
    reason: str = ""  # why it opened, as reported in anomaly.opened and the decision
    values: dict[str, Any] = field(default_factory=dict)  # the offending values, likewise
    since_step: Any = None  # the run's step when the condition began to hold (`for: N steps`)
    since_evals: int = 0  # the run's evals before the condition began to hold (`for: N evals`)
    resolved_step: Any = None  # the run's step and evals when its last anomaly resolved (`cooldown`)
    resolved_evals: int = 0

    def to_dict(self) -> dict[str, Any]:
        # Spelled out: a worker writes ~40 of these a run turn, and a loop over the slots cost 3x more.
        # The run's progress where the rule began or resolved is kept only when known (small checkpoints).
        out = {"sig": self.sig, "kind_state": self.kind_state, "holding": self.holding, "since": self.since,
               "samples": self.samples, "opened_by": self.opened_by, "escalated": self.escalated,
               "resolved_at": self.resolved_at, "reason": self.reason, "values": self.values}  # fmt: skip
        if self.since_step:
            out["since_step"] = self.since_step
        if self.since_evals:
            out["since_evals"] = self.since_evals
        if self.resolved_step:
            out["resolved_step"] = self.resolved_step
        if self.resolved_evals:
            out["resolved_evals"] = self.resolved_evals
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RuleState:
        try:  # as `to_dict` wrote it: a worker decodes ~30 of these a run turn, the fallback costs 6x more
            return cls(**data)
        except TypeError:
            pass
        named = {_OLD_RULE_KEYS.get(k, k): v for k, v in data.items()}
        return cls(**{k: v for k, v in named.items() if k in cls.__slots__})


PROGRESS_KEYS = frozenset({"since_step", "since_evals", "resolved_step", "resolved_evals"})  # left out when 0/None
_OLD_RULE_KEYS = {"k": "kind_state", "c": "holding", "n": "samples", "esc": "escalated", "open": "opened_by",
                  "resolved": "resolved_at"}  # fmt: skip


@dataclass(slots=True)
class PolicyState:
    """Everything the engine remembers about one run; JSON-serialisable, kept in the worker checkpoint."""

    decision: str | None = None
    policy: str | None = None  # hash of the policy that evaluated the last event
    start: float | None = None
    now: float | None = None
    last_input: float | None = None  # ts of the last input that was not a tick
    ended: bool = False
    stop_asked: float | None = None  # ts of this launch's latest stop.requested, whoever asked (a fault it caused)
    dirty: bool = False  # the set of open rules changed outside an event (a policy change)
    step: Any = None
    config: dict[str, Any] = field(default_factory=dict)  # the launch config (baselines live there)
    rules: dict[str, RuleState] = field(default_factory=dict)
    deciding: dict[str, str] = field(default_factory=dict)  # open rule id -> the decision it asks for
    launch_seq: int | None = None  # seq of the run.launched being judged
    kept: dict[str, float] = field(default_factory=dict)  # rule id -> until: a person chose "keep running"
    first_step: Any = None  # the first step of this launch (phases counted in steps)
    evals: int = 0  # metric events of this launch holding a validation metric (phases counted in evals)
    primary: dict[str, Any] | None = None  # the primary metric and its best value (policies/primary.py)
    plan: dict[str, Any] = field(default_factory=dict)  # the planned length and class count (policies/plan.py)
    last_eval: list[Any] | None = None  # the last eval's [name, value] pairs: the same carried on is no new eval

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__}
        out["rules"] = {rule_id: rs.to_dict() for rule_id, rs in self.rules.items()}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PolicyState:
        fields = {k: v for k, v in data.items() if k in cls.__slots__}
        fields["rules"] = {rule_id: RuleState.from_dict(rs) for rule_id, rs in fields.get("rules", {}).items()}
        return cls(**fields)

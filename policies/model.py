"""The policy as data: rules with their kind, persistence, phase, decision; plain frozen records, no I/O."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, cast

from trainwarden.core.metrics import is_validation, quality
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.policies.durations import Persistence, Span

PHASES = ("startup", "steady", "any")
MODES = ("enforce", "shadow")  # shadow: the rule records what it would have decided and decides nothing
SEVERITIES = ("info", "warning", "critical")
INFO, WARNING, CRITICAL = SEVERITIES
DECISIONS = (t.STOP, t.WAIT)
DEFAULT_STARTUP_S = 1800.0  # the seed's "active watch": the first 30 minutes of a run
CACHE_SHAPES = 4096  # event shapes remembered per policy (bounded: data keys come from outside)


class Kind(Protocol):
    """What a rule kind implements. `st` is the rule's own state (RuleState.kind_state): a JSON-serialisable
    dict it may mutate, with short keys (it is in every checkpoint; each kind's `initial` says what they hold).

    `observe` returns True/False when the event tells something about the condition, None when it
    does not (the rule's persistence is then left alone). `explain` turns the state into a reason
    and the offending values, and is called only when something is emitted, to keep the hot path small.
    `initial` gets the launch config (where baselines live) and the run's start time. `observe`
    gets `name`: the first of `keys` present in the event (the index resolves it once per event
    shape), or None for kinds that look at whole events (`keys` None). A kind may declare
    `clear_only`: event types that can only clear its condition (a metric after a log match); the
    engine does not call `observe` for those while the rule is quiet. A kind that declares `planned = True` finds
    the run's progress in `st["progress"]` before each `observe`: [the share of its planned length done (None when
    unknown: policies/plan.py), the evals it ran, the class count it stated (None)].
    """

    kind: ClassVar[str]
    time_driven: ClassVar[bool]  # its condition changes with time alone (absence)

    @property
    def events(self) -> frozenset[str]: ...  # event types the kind observes

    @property
    def keys(self) -> tuple[str, ...] | None: ...  # data keys of which one must be present; None: every event

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]: ...

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None: ...

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]: ...

    def params(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Escalation:
    """A stronger decision once the condition has persisted longer: 'anomaly at once, STOP if it persists'."""

    decision: str
    persist: Persistence


FAULT_KINDS = frozenset({"nonfinite", "nonfinite_term", "log_pattern"})  # `Rule.fault`


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    id: str
    kind: Kind
    persist: Persistence = field(default_factory=Persistence)
    phase: str = "any"
    severity: str = "warning"
    decision: str | None = None  # STOP, WAIT, or None: anomaly only
    escalate: Escalation | None = None
    remedy: str = ""
    cooldown: Span = field(default_factory=Span)  # after a resolve, the rule does not open again for this long
    confirm_s: float = 0.0  # a STOP it asks for waits this long for a person (Slack buttons); 0: at once
    mode: str | None = None  # enforce | shadow; None: the policy's mode
    defer: bool = False  # holds off (does not open) while the run's primary metric is improving

    @property
    def fault(self) -> bool:
        """A fault of one run (a non-finite value, a crash in the log): its STOP is never held by the stop
        breaker (workers/breaker.py)."""
        return self.kind.kind in FAULT_KINDS

    @property
    def definition(self) -> str:
        """Digest of the rule's id and content: a rule edited is a new definition (the stop breaker's grace for
        new rules, workers/breaker.py), one only moved within the file is not."""
        return _digest(self.describe())

    @property
    def cooldown_s(self) -> float:
        return self.cooldown.seconds

    @property
    def time_sensitive(self) -> bool:
        """Whether the rule must be looked at on events it does not observe (time moved on)."""
        return bool(
            self.kind.time_driven
            or self.persist.seconds
            or self.cooldown.seconds
            or (self.escalate is not None and self.escalate.persist.seconds)
        )

    def describe(self) -> dict[str, Any]:
        """Identity and parameters: hashed into the policy's identity and the rule's state signature
        (fields added later appear only when set, so that an unchanged rule keeps its digest)."""
        extra: dict[str, Any] = {}
        if self.persist.progress:
            extra["for_progress"] = [self.persist.steps, self.persist.evals]
        if self.escalate is not None and self.escalate.persist.progress:
            extra["escalate_progress"] = [self.escalate.persist.steps, self.escalate.persist.evals]
        if self.cooldown.steps or self.cooldown.evals:
            extra["cooldown_progress"] = [self.cooldown.steps, self.cooldown.evals]
        if self.mode is not None:
            extra["mode"] = self.mode
        if self.defer:
            extra["defer"] = True
        return {
            **extra,
            "id": self.id,
            "kind": self.kind.kind,
            **self.kind.params(),
            "for": [self.persist.samples, self.persist.seconds],
            "phase": self.phase,
            "severity": self.severity,
            "decision": self.decision,
            "escalate": [self.escalate.decision, self.escalate.persist.samples, self.escalate.persist.seconds]
            if self.escalate
            else None,
            "remedy": self.remedy,
            "cooldown": self.cooldown.seconds,
            "confirm": self.confirm_s,
        }


# The layout of the kinds' own state (`Kind.initial`): part of each rule's digest and of the policy's hash, so
# that a run whose state was saved in another layout (the short keys of earlier versions) has the policy applied
# again and each rule's window started over, instead of being misread.
KIND_STATE_LAYOUT = 2


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


# rule index, id, its kind's observe, the key it reads, whether this event can only clear it
Observer = tuple[int, str, Callable[..., bool | None], str | None, bool]
# the concerned rules, the time-sensitive others, whether the event is an eval (holds a validation metric), and
# the eval metrics in it that could be the run's primary one (name, mode)
Concerned = tuple[tuple[Observer, ...], tuple[int, ...], bool, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class Index:
    """Which rules look at an event: by type, then by the data keys present (so cost ~ rules concerned)."""

    keyed: dict[str, dict[str, tuple[int, ...]]]
    unkeyed: dict[str, tuple[int, ...]]
    timed: tuple[int, ...]
    input_types: frozenset[str]
    rules: tuple[Rule, ...]
    timed_set: frozenset[int]
    startup_only: frozenset[int]  # rules that can open only in the startup phase
    planned: frozenset[int] = frozenset()  # rules whose kind reads the run's progress (`Kind.planned`, below)
    # (type, data keys) -> concerned rules with the key each reads, and the time-sensitive rules not
    # among them: computed once per event shape (a run's events share a few shapes)
    cache: dict[tuple[str, tuple[str, ...]], Concerned] = field(default_factory=dict)

    @classmethod
    def build(cls, rules: tuple[Rule, ...]) -> Index:
        keyed: dict[str, dict[str, list[int]]] = {}
        unkeyed: dict[str, list[int]] = {}
        for i, rule in enumerate(rules):
            for typ in rule.kind.events:
                if rule.kind.keys is None:
                    unkeyed.setdefault(typ, []).append(i)
                else:
                    for key in rule.kind.keys:
                        keyed.setdefault(typ, {}).setdefault(key, []).append(i)
        return cls(
            keyed={typ: {k: tuple(dict.fromkeys(v)) for k, v in m.items()} for typ, m in keyed.items()},
            unkeyed={typ: tuple(v) for typ, v in unkeyed.items()},
            timed=tuple(i for i, r in enumerate(rules) if r.time_sensitive),
            input_types=frozenset(keyed) | frozenset(unkeyed) | {t.TICK},
            rules=rules,
            timed_set=frozenset(i for i, r in enumerate(rules) if r.time_sensitive),
            startup_only=frozenset(i for i, r in enumerate(rules) if r.phase == "startup"),
            planned=frozenset(i for i, r in enumerate(rules) if getattr(r.kind, "planned", False)),
        )

    def concerned(self, event: Event) -> Concerned:
        """The rules that observe `event` (policy order, each with the data key it reads), the
        time-sensitive rules that do not (they are looked at because time moved on), and what the event
        is for the run's progress (an eval, and which primary-metric candidates it holds)."""
        shape = (event.type, tuple(event.data))
        found = self.cache.get(shape)
        if found is None:
            hits = set(self.unkeyed.get(event.type, ()))
            by_key = self.keyed.get(event.type, {})
            for key in event.data:
                hits.update(by_key.get(key, ()))
            present = set(event.data)
            observed = tuple(self._observer(i, event.type, present) for i in sorted(hits))
            is_eval, qualities = False, cast(tuple[tuple[str, str], ...], ())
            if event.type == t.METRIC:
                qualities = tuple((k, q.mode) for k in event.data if (q := quality(k)) is not None)
                is_eval = bool(qualities) or any(is_validation(k) for k in event.data)
            found = (observed, tuple(i for i in self.timed if i not in hits), is_eval, qualities)
            if len(self.cache) < CACHE_SHAPES:
                self.cache[shape] = found
        return found

    def _observer(self, i: int, event_type: str, present: set[str]) -> Observer:
        kind = self.rules[i].kind
        key = None if kind.keys is None else next(k for k in kind.keys if k in present)
        return i, self.rules[i].id, kind.observe, key, event_type in getattr(kind, "clear_only", ())


@dataclass(frozen=True, slots=True)
class Primary:
    """The eval metric that says whether a run is worth continuing (WER, accuracy, BLEU, mAP, ...), and its
    direction: rules with `defer` hold off while it improves (a new best within its last `patience` evals)."""

    names: tuple[str, ...]  # its spellings, in lookup order
    mode: str  # min: lower is better
    patience: int = 3

    def describe(self) -> list[Any]:
        return [list(self.names), self.mode, self.patience]


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    rules: tuple[Rule, ...]
    startup: Span = field(default_factory=lambda: Span(seconds=DEFAULT_STARTUP_S))
    mode: str = "enforce"  # every rule's mode unless it names its own
    primary: Primary | None = None  # None: the launch config's, else inferred from what the run prints
    text: str | None = field(default=None, compare=False)  # the YAML it was read from (recorded when loaded)
    source: str = field(default="<built>", compare=False)
    # the text of the policy it `extends` (recorded with it: a replay rebuilds these rules whatever the installed
    # default policy says); None when the file is the whole policy
    base_text: str | None = field(default=None, compare=False)
    hash: str = field(init=False, compare=False)
    sigs: tuple[str, ...] = field(init=False, compare=False, repr=False)
    index: Index = field(init=False, compare=False, repr=False)
    shadow: frozenset[str] = field(init=False, compare=False, repr=False)  # ids of the rules in shadow mode

    def __post_init__(self) -> None:
        described = [r.describe() for r in self.rules]
        object.__setattr__(self, "sigs", tuple(_digest({"rule": d, "state": KIND_STATE_LAYOUT}) for d in described))
        # Content hash recorded with every decision, so a replay knows which policy made it.
        identity: dict[str, Any] = {"name": self.name, "startup": self.startup.seconds, "rules": described,
                                    "state": KIND_STATE_LAYOUT}  # fmt: skip
        if self.startup.steps or self.startup.evals:
            identity["startup_progress"] = [self.startup.steps, self.startup.evals]
        if self.mode != "enforce":
            identity["mode"] = self.mode
        if self.primary is not None:
            identity["primary"] = self.primary.describe()
        object.__setattr__(self, "hash", _digest(identity))
        object.__setattr__(self, "index", Index.build(self.rules))
        shadow = frozenset(r.id for r in self.rules if (r.mode or self.mode) == "shadow")
        object.__setattr__(self, "shadow", shadow)

    @property
    def startup_s(self) -> float:
        return self.startup.seconds

    def rule(self, rule_id: str) -> Rule | None:
        return next((r for r in self.rules if r.id == rule_id), None)


@dataclass(frozen=True, slots=True)
class Outcome:
    """An event the engine wants appended: `anomaly.opened`, `anomaly.resolved`, `decision`, `policy.applied`
    (`data`: their payload TypedDicts, events/payloads/)."""

    type: str
    data: Mapping[str, Any]

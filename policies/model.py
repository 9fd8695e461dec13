"""What rules conclude and what the engine emits: plain frozen records, no I/O."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from events.envelope import Event


@dataclass(frozen=True, slots=True)
class Finding:
    """A rule's verdict on one event it applies to."""

    rule: str
    firing: bool
    reason: str = ""
    values: dict[str, Any] = field(default_factory=dict)


class Rule(Protocol):
    id: str
    decision: str | None  # STOP, WAIT, or None for "anomaly only"
    severity: str
    remedy: str

    def check(self, event: Event) -> Finding | None:
        """None when the event is not for this rule; else whether the rule fires on it."""
        ...

    def describe(self) -> dict[str, Any]:
        """The rule's identity and parameters (hashed into the policy's identity)."""
        ...


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    rules: tuple[Rule, ...]

    @property
    def hash(self) -> str:
        """Content hash recorded with every decision, so a replay knows which policy made it."""
        body = json.dumps([r.describe() for r in self.rules], sort_keys=True, default=str)
        return hashlib.sha256(f"{self.name}\n{body}".encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Outcome:
    """An event the engine wants appended: `anomaly.opened`, `anomaly.resolved` or `decision`."""

    type: str
    data: dict[str, Any]

"""The policy file's reader: the shared YAML reader (core/yamlfile.py) plus the policy's own value kinds.

Durations, persistence (`for:`), metric names with their aliases and regular expressions; each
accessor records a problem at the offending node and the JSON Schema fragment it accepts, like the
shared ones, so one pass reports every error and the policy's schema comes from the same code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from trainwarden.core.yamlfile import Context, Reader
from trainwarden.policies.backtracking import catastrophic
from trainwarden.policies.durations import (
    DURATION_HINT,
    PERSISTENCE_HINT,
    SPAN_HINT,
    Persistence,
    Span,
    parse_duration,
    parse_persistence,
    parse_span,
)
from trainwarden.policies.names import expand

DURATION_SCHEMA = {"type": "string", "description": DURATION_HINT}
PERSISTENCE_SCHEMA = {"type": ["integer", "string"], "description": PERSISTENCE_HINT}
SPAN_SCHEMA = {"type": "string", "description": SPAN_HINT}


@dataclass(slots=True)
class PolicyContext(Context):
    noun: str = "field"
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class PolicyReader(Reader):
    """A `Reader` whose context is a `PolicyContext` (section() and items() give PolicyReaders too)."""

    ctx: PolicyContext

    def duration(self, key: str, *, required: bool = False, default: float = 0.0) -> float:
        got = self.raw(key, DURATION_SCHEMA, required=required)
        if got is None:
            return default
        node, value = got
        seconds = parse_duration(value) if isinstance(value, str) else None
        if seconds is None:
            self.ctx.problem(node, f"'{key}' must be {DURATION_HINT}, got {value!r}")
            return default
        return seconds

    def span(self, key: str, *, default: Span) -> Span:
        """A duration, or the run's progress in steps or evals (`500 steps`, `3 evals`)."""
        got = self.raw(key, SPAN_SCHEMA)
        if got is None:
            return default
        node, value = got
        found = parse_span(value)
        if found is None:
            self.ctx.problem(node, f"'{key}' must be {SPAN_HINT}, got {value!r}")
            return default
        return found

    def persistence(self, key: str) -> Persistence:
        got = self.raw(key, PERSISTENCE_SCHEMA)
        if got is None:
            return Persistence()
        node, value = got
        found = parse_persistence(value)
        if found is None:
            self.ctx.problem(node, f"'{key}' must be {PERSISTENCE_HINT}, got {value!r}")
            return Persistence()
        return found

    def metric(self, key: str = "metric", *, required: bool = True) -> tuple[str, ...]:
        """Metric names with their aliases, in lookup order."""
        names = self.strings(key, required=required)
        return expand(names, self.ctx.aliases) if names else ()

    def regex(self, key: str, *, required: bool = True, description: str = "") -> re.Pattern[str] | None:
        pattern = self.string(key, required=required, description=description)
        if pattern is None:
            return None
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            self.fail(key, f"'{key}' is not a valid regular expression: {exc}")
            return None
        why = catastrophic(pattern)
        if why is not None:  # it runs on every log line: one bad line would hold the worker for minutes
            self.fail(key, f"'{key}' can backtrack catastrophically ({why}); rewrite it without the nested "
                      "repeat (e.g. (\\w+\\s?)* -> [\\w\\s]*)")  # fmt: skip
            return None
        return compiled

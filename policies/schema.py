"""Reading YAML nodes against a schema, collecting every problem as `file:line:column: message`.

A `Reader` wraps one mapping node. Each accessor validates one field, records a problem (pointing
at the offending node) instead of raising, and returns a default, so one pass reports every error
in the file. `finish()` reports the fields nobody asked for, with the list of expected ones.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from trainwarden.policies.durations import (
    DURATION_HINT,
    PERSISTENCE_HINT,
    Persistence,
    parse_duration,
    parse_persistence,
)
from trainwarden.policies.names import expand


@dataclass(slots=True)
class Context:
    source: str
    problems: list[str] = field(default_factory=list)
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def where(self, node: yaml.Node) -> str:
        return f"{self.source}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"

    def problem(self, node: yaml.Node, message: str) -> None:
        self.problems.append(f"{self.where(node)}: {message}")


def plain(node: yaml.Node) -> Any:
    """A node's Python value (safe tags only)."""
    return yaml.safe_load(yaml.serialize(node))


class Reader:
    def __init__(self, node: yaml.Node, ctx: Context, what: str) -> None:
        self.ctx = ctx
        self.what = what
        self.node = node
        self.fields: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        self.used: set[str] = set()
        if not isinstance(node, yaml.MappingNode):
            ctx.problem(node, f"{what} must be a mapping of field: value")
            return
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in self.fields:
                ctx.problem(key_node, f"field '{key}' appears twice in {what}")
            self.fields[key] = (key_node, value_node)

    @property
    def ok(self) -> bool:
        return isinstance(self.node, yaml.MappingNode)

    def has(self, key: str) -> bool:
        self.used.add(key)
        return key in self.fields

    def value_node(self, key: str) -> yaml.Node:
        return self.fields[key][1]

    def _get(self, key: str, required: bool) -> tuple[yaml.Node, Any] | None:
        self.used.add(key)
        if key not in self.fields:
            if required and self.ok:
                self.ctx.problem(self.node, f"{self.what} needs the field '{key}'")
            return None
        node = self.fields[key][1]
        return node, plain(node)

    def fail(self, key: str, message: str) -> None:
        node = self.fields[key][1] if key in self.fields else self.node
        self.ctx.problem(node, message)

    def string(self, key: str, *, required: bool = False, default: str | None = None) -> str | None:
        got = self._get(key, required)
        if got is None:
            return default
        node, value = got
        if not isinstance(value, str) or not value:
            self.ctx.problem(node, f"'{key}' must be a non-empty string, got {value!r}")
            return default
        return value

    def number(
        self, key: str, *, required: bool = False, default: float | None = None, minimum: float | None = None,
        positive: bool = False,
    ) -> float | None:  # fmt: skip
        got = self._get(key, required)
        if got is None:
            return default
        node, value = got
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            self.ctx.problem(node, f"'{key}' must be a number, got {value!r}")
            return default
        if positive and value <= 0:
            self.ctx.problem(node, f"'{key}' must be positive, got {value!r}")
            return default
        if minimum is not None and value < minimum:
            self.ctx.problem(node, f"'{key}' must be at least {minimum:g}, got {value!r}")
            return default
        return float(value)

    def integer(self, key: str, *, default: int, minimum: int = 1) -> int:
        got = self._get(key, False)
        if got is None:
            return default
        node, value = got
        if isinstance(value, bool) or not isinstance(value, int):
            self.ctx.problem(node, f"'{key}' must be a whole number, got {value!r}")
            return default
        if value < minimum:
            self.ctx.problem(node, f"'{key}' must be at least {minimum}, got {value}")
            return default
        return value

    def choice(self, key: str, options: tuple[str, ...], *, default: str) -> str:
        value = self.string(key, default=default)
        if value not in options:
            self.fail(key, f"'{key}' must be one of {', '.join(options)}, got {value!r}")
            return default
        return value

    def boolean(self, key: str, *, default: bool) -> bool:
        got = self._get(key, False)
        if got is None:
            return default
        node, value = got
        if not isinstance(value, bool):
            self.ctx.problem(node, f"'{key}' must be true or false, got {value!r}")
            return default
        return value

    def duration(self, key: str, *, required: bool = False, default: float = 0.0) -> float:
        got = self._get(key, required)
        if got is None:
            return default
        node, value = got
        seconds = parse_duration(value) if isinstance(value, str) else None
        if seconds is None:
            self.ctx.problem(node, f"'{key}' must be {DURATION_HINT}, got {value!r}")
            return default
        return seconds

    def persistence(self, key: str) -> Persistence:
        got = self._get(key, False)
        if got is None:
            return Persistence()
        node, value = got
        found = parse_persistence(value)
        if found is None:
            self.ctx.problem(node, f"'{key}' must be {PERSISTENCE_HINT}, got {value!r}")
            return Persistence()
        return found

    def strings(self, key: str, *, required: bool = False, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        """A string or a list of strings."""
        got = self._get(key, required)
        if got is None:
            return default
        node, value = got
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(isinstance(x, str) and x for x in items):
            self.ctx.problem(node, f"'{key}' must be a name or a list of names, got {value!r}")
            return default
        return tuple(items)

    def metric(self, key: str = "metric", *, required: bool = True) -> tuple[str, ...]:
        """Metric names with their aliases, in lookup order."""
        names = self.strings(key, required=required)
        return expand(names, self.ctx.aliases) if names else ()

    def regex(self, key: str) -> re.Pattern[str] | None:
        pattern = self.string(key, required=True)
        if pattern is None:
            return None
        try:
            return re.compile(pattern)
        except re.error as exc:
            self.fail(key, f"'{key}' is not a valid regular expression: {exc}")
            return None

    def finish(self) -> None:
        expected = ", ".join(sorted(self.used))
        for key, (key_node, _) in self.fields.items():
            if key not in self.used:
                self.ctx.problem(key_node, f"unknown field '{key}' in {self.what}; expected one of: {expected}")

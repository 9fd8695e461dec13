"""The one reader for trainwarden's YAML files (settings, servers, experiments, plans, policies).

Every problem is reported as `file:line:column: message` and one pass reports all of them: a
`Reader` wraps one mapping node; each accessor validates one key, records a problem at the
offending node instead of raising, and returns a default. `finish()` reports keys nobody asked for
(with a did-you-mean). `Context.check()` raises once, listing everything.

The accessors also record what they accept, so the JSON Schema of a file is generated from its
parser: run the parser once in *probe* mode (`Context(probe=True)`, an empty document, every
section and list visited once) and call `json_schema()` on its top `Reader`. Parsers therefore
read their keys straight-line, through `section()` and `items()`, not behind `if key in ...`.

Lives in `core/` because every package reads such files; the file-level parts are in core/yamlsource.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from typing import Any, Self, overload

import yaml
from trainwarden.core.durations import DURATION_HINT, duration_problem, fmt_duration, parse_duration
from trainwarden.core.yamlsource import (  # re-exported: parsers import the reader's parts from here
    MAX_YAML_CHARS,
    Context,
    compose,
    did_you_mean,
    empty_mapping,
    in_file_order,
    plain,
    read_text,
    report,
    where,
)

Schema = dict[str, Any]


class Reader:
    """One mapping node of a file: typed accessors that collect problems and record the schema."""

    def __init__(self, node: yaml.Node | None, ctx: Context, what: str) -> None:
        self.ctx = ctx
        self.what = what
        self.present = node is not None
        self.node: yaml.Node = node if node is not None else empty_mapping()
        self.fields: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        self.used: set[str] = set()
        self.properties: dict[str, Any] = {}  # key -> schema (dicts, lists and nested Readers)
        self.required: set[str] = set()
        if not isinstance(self.node, yaml.MappingNode):
            ctx.problem(self.node, f"{what} must be a mapping of {ctx.noun}s to values")
            return
        for key_node, value_node in self.node.value:
            key = str(key_node.value)
            if key in self.fields:
                ctx.problem(key_node, f"{ctx.noun} '{key}' appears twice in {what}")
            self.fields[key] = (key_node, value_node)

    # -- plumbing ---------------------------------------------------------------------------------

    @property
    def ok(self) -> bool:
        return isinstance(self.node, yaml.MappingNode)

    def has(self, key: str) -> bool:
        self.used.add(key)
        return key in self.fields

    def value_node(self, key: str) -> yaml.Node:
        return self.fields[key][1]

    def node_of(self, key: str) -> yaml.Node:
        """The value's node, or the mapping's when the key is absent (where a problem about it points)."""
        return self.fields[key][1] if key in self.fields else self.node

    def fail(self, key: str, message: str) -> None:
        self.ctx.problem(self.node_of(key), message)

    def declare(self, key: str, schema: Any, *, required: bool = False) -> None:
        self.used.add(key)
        self.properties.setdefault(key, schema)
        if required:
            self.required.add(key)

    def needs(self, keys: Collection[str], message: str) -> bool:
        """Required keys with one message for all of them; False when one is missing."""
        self.required.update(keys)
        if self.present and self.ok and not set(keys) <= self.fields.keys():
            self.ctx.problem(self.node, message)
            return False
        return True

    def raw(self, key: str, schema: Schema, *, required: bool = False) -> tuple[yaml.Node, Any] | None:
        """A value the caller checks itself; `schema` says what it accepts."""
        self.declare(key, schema, required=required)
        if key not in self.fields:
            if required and self.present and self.ok:
                self.ctx.problem(self.node, f"{self.what} needs '{key}'")
            return None
        node = self.fields[key][1]
        return node, plain(node)

    # -- scalars ----------------------------------------------------------------------------------

    def string(
        self, key: str, *, required: bool = False, default: str | None = None, pattern: re.Pattern[str] | None = None,
        hint: str = "is not valid", label: str | None = None, description: str = "",
    ) -> str | None:  # fmt: skip
        """A non-empty string; `pattern` restricts it further (a mismatch says `<label> 'value' <hint>`)."""
        schema: Schema = {"type": "string", "minLength": 1}
        if pattern is not None:
            schema["pattern"] = pattern.pattern
        if description:
            schema["description"] = description
        got = self.raw(key, schema, required=required)
        if got is None:
            return default
        node, value = got
        if not isinstance(value, str) or not value:
            self.ctx.problem(node, f"'{key}' must be a non-empty string, got {value!r}")
            return default
        if pattern is not None and not pattern.match(value):
            self.ctx.problem(node, f"{label or key} {value!r} {hint}")
            return default
        return value

    def number(
        self, key: str, *, required: bool = False, default: float | None = None, minimum: float | None = None,
        positive: bool = False, maximum: float | None = None,
    ) -> float | None:  # fmt: skip
        schema: Schema = {"type": "number"}
        if positive:
            schema["exclusiveMinimum"] = 0
        if minimum is not None:
            schema["minimum"] = minimum
        if maximum is not None:
            schema["maximum"] = maximum
        got = self.raw(key, schema, required=required)
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
        if maximum is not None and value > maximum:
            self.ctx.problem(node, f"'{key}' must be at most {maximum:g}, got {value!r}")
            return default
        return float(value)

    def seconds(
        self, key: str, *, minimum: float | None = None, positive: bool = False, whole: bool = False
    ) -> float | None:
        """A duration setting (every `*_s` key): seconds as a number (`90`, `0.5`) or a duration of the one
        grammar (core/durations.py: `90s`, `1m`, `1h30m`, `500ms`); `whole`: a whole number of seconds."""
        expected = f"a number of seconds (90) or {DURATION_HINT}"
        got = self.raw(key, {"type": ["number", "string"], "description": expected})
        if got is None:
            return None
        node, value = got
        seconds = parse_duration(value) if isinstance(value, str) else value
        if isinstance(value, str) and seconds is None:
            self.ctx.problem(node, f"'{key}': {duration_problem(value, expected=expected)}")
            return None
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
            self.ctx.problem(node, f"'{key}' must be {expected}, got {value!r}")
            return None
        if (positive and seconds <= 0) or (minimum is not None and seconds < minimum):
            need = f"at least {fmt_duration(minimum)}" if minimum is not None and seconds < minimum else "positive"
            self.ctx.problem(node, f"'{key}' must be {need}, got {value!r}")
            return None
        if whole and not float(seconds).is_integer():
            self.ctx.problem(node, f"'{key}' must be whole seconds, got {value!r}")
            return None
        return float(seconds)

    @overload
    def integer(
        self, key: str, *, required: bool = ..., default: int, minimum: int = ..., maximum: int | None = ...
    ) -> int: ...
    @overload
    def integer(
        self, key: str, *, required: bool = ..., default: None = ..., minimum: int = ..., maximum: int | None = ...
    ) -> int | None: ...
    def integer(self, key: str, *, required: bool = False, default: int | None = None, minimum: int = 1,
                maximum: int | None = None) -> int | None:  # fmt: skip
        schema: Schema = {"type": "integer", "minimum": minimum, **({"maximum": maximum} if maximum else {})}
        got = self.raw(key, schema, required=required)
        if got is None:
            return default
        node, value = got
        if isinstance(value, bool) or not isinstance(value, int):
            self.ctx.problem(node, f"'{key}' must be an integer, got {value!r}")
            return default
        if value < minimum:
            self.ctx.problem(node, f"'{key}' must be at least {minimum}, got {value}")
            return default
        if maximum is not None and value > maximum:
            self.ctx.problem(node, f"'{key}' must be at most {maximum}, got {value}")
            return default
        return value

    @overload
    def boolean(self, key: str, *, default: bool) -> bool: ...
    @overload
    def boolean(self, key: str, *, default: None = ...) -> bool | None: ...
    def boolean(self, key: str, *, default: bool | None = None) -> bool | None:
        got = self.raw(key, {"type": "boolean"})
        if got is None:
            return default
        node, value = got
        if not isinstance(value, bool):
            self.ctx.problem(node, f"'{key}' must be true or false, got {value!r}")
            return default
        return value

    def choice(self, key: str, options: tuple[str, ...], *, default: str, label: str | None = None) -> str:
        got = self.raw(key, {"enum": list(options), "default": default})
        if got is None:
            return default
        node, value = got
        if value not in options:
            self.ctx.problem(node, f"{label or repr(key)} must be one of {', '.join(options)}, got {value!r}")
            return default
        return str(value)

    # -- collections ------------------------------------------------------------------------------

    def strings(self, key: str, *, required: bool = False, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        """A string or a list of strings."""
        names: Schema = {"type": "string", "minLength": 1}
        got = self.raw(key, {"anyOf": [names, {"type": "array", "items": names, "minItems": 1}]}, required=required)
        if got is None:
            return default
        node, value = got
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(isinstance(x, str) and x for x in items):
            self.ctx.problem(node, f"'{key}' must be a name or a list of names, got {value!r}")
            return default
        return tuple(items)

    def string_list(
        self, key: str, *, pattern: re.Pattern[str] | None = None, hint: str = "is not valid", expected: str = "a list"
    ) -> tuple[tuple[yaml.Node, str], ...]:
        """A list of non-empty strings, each with its node (for checks that point at one entry)."""
        item: Schema = {"type": "string", "minLength": 1}
        if pattern is not None:
            item["pattern"] = pattern.pattern
        got = self.raw(key, {"type": "array", "items": item})
        if got is None:
            return ()
        node, _ = got
        if not isinstance(node, yaml.SequenceNode):
            self.ctx.problem(node, f"'{key}' must be {expected}")
            return ()
        out: list[tuple[yaml.Node, str]] = []
        for entry in node.value:
            value = plain(entry)
            if not isinstance(value, str) or not value:
                self.ctx.problem(entry, f"each entry of '{key}' must be a non-empty string, got {value!r}")
            elif pattern is not None and not pattern.match(value):
                self.ctx.problem(entry, f"{value!r} in '{key}' {hint}")
            else:
                out.append((entry, value))
        return tuple(out)

    def integers(self, key: str, *, minimum: int = 0, unique: bool = True) -> tuple[int, ...] | None:
        """A list of whole numbers (GPU indexes)."""
        schema: Schema = {"type": "array", "items": {"type": "integer", "minimum": minimum}, "uniqueItems": unique}
        got = self.raw(key, schema)
        if got is None:
            return None
        node, value = got
        if not isinstance(value, list) or not all(type(v) is int and v >= minimum for v in value):
            self.ctx.problem(node, f"'{key}' must be a list of whole numbers >= {minimum} like [0, 1], got {value!r}")
            return None
        if unique and len(set(value)) != len(value):
            self.ctx.problem(node, f"{key} lists a GPU twice")
            return None
        return tuple(value)

    def string_map(self, key: str) -> dict[str, tuple[yaml.Node, str]]:
        """name -> string (numbers are taken as their text), each with its key's node."""
        schema = {"type": "object", "additionalProperties": {"type": ["string", "number"]}}
        got = self.raw(key, schema)
        if got is None:
            return {}
        node, _ = got
        if not isinstance(node, yaml.MappingNode):
            self.ctx.problem(node, f"'{key}' must be a mapping of names to values")
            return {}
        out: dict[str, tuple[yaml.Node, str]] = {}
        for key_node, value_node in node.value:
            value = plain(value_node)
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                self.ctx.problem(value_node, f"{key}.{key_node.value} must be a string or number, got {value!r}")
                continue
            out[str(key_node.value)] = (key_node, str(value))
        return out

    def section(self, key: str, what: str, *, required: bool = False) -> Self:
        """A nested mapping; absent, an empty one (its `present` is False), so it reads as defaults."""
        self.used.add(key)
        if required:
            self.required.add(key)
            if self.present and self.ok and key not in self.fields:
                self.ctx.problem(self.node, f"{self.what} needs '{key}'")
        sub = type(self)(self.fields[key][1] if key in self.fields else None, self.ctx, what)
        self.properties.setdefault(key, sub)
        return sub

    def items(self, key: str, what: str, *, required: bool = False) -> list[Self]:
        """A list of mappings, one Reader each (in probe mode: one empty entry, to record its schema)."""
        self.used.add(key)
        if required:
            self.required.add(key)
        if key not in self.fields:
            if required and self.present and self.ok:
                self.ctx.problem(self.node, f"{self.what} needs '{key}'")
            readers = [type(self)(None, self.ctx, what)] if self.ctx.probe else []
        elif not isinstance(self.fields[key][1], yaml.SequenceNode):
            self.ctx.problem(self.fields[key][1], f"'{key}' must be a list of mappings")
            readers = [type(self)(None, self.ctx, what)] if self.ctx.probe else []
        else:
            readers = [type(self)(item, self.ctx, what) for item in self.fields[key][1].value]
        if readers:
            self.properties.setdefault(key, {"type": "array", "items": readers[0]})
        return readers

    # -- the end ----------------------------------------------------------------------------------

    def finish(self) -> None:
        """Report the keys nobody asked for, with the closest expected one."""
        expected = sorted(self.used)
        for key, (key_node, _) in self.fields.items():
            if key not in self.used:
                self.ctx.problem(
                    key_node, f"unknown {self.ctx.noun} '{key}' in {self.what}; expected one of: "
                    f"{', '.join(expected)}{did_you_mean(key, expected)}"
                )  # fmt: skip

    def json_schema(self) -> Schema:
        out: Schema = {"type": "object", "properties": _resolve(self.properties), "additionalProperties": False}
        if self.required:
            out["required"] = sorted(self.required)
        return out


def _resolve(value: Any) -> Any:
    if isinstance(value, Reader):
        return value.json_schema()
    if isinstance(value, dict):
        return {k: _resolve(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v) for v in value]
    return value


def document_schema(title: str, top: Reader, description: str = "") -> Schema:
    """The JSON Schema document of a file whose parser ran in probe mode on `top`."""
    schema: Schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title}
    if description:
        schema["description"] = description
    schema.update(top.json_schema())
    return schema


__all__ = ["MAX_YAML_CHARS", "Context", "Reader", "Schema", "compose", "did_you_mean", "document_schema",
           "empty_mapping", "in_file_order", "plain", "read_text", "report", "where"]  # fmt: skip

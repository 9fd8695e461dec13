"""Reading YAML config files so that every error names file:line:column and what was expected.

Lives in `events/` because every package (policies, workers, the CLI) reads such files and
`events/` is the one package they all depend on.
"""

from __future__ import annotations

from collections.abc import Set
from pathlib import Path
from typing import Any

import yaml
from trainwarden.events.errors import YamlFileError


class Doc:
    """One YAML file being checked: turns nodes into values and mistakes into located errors."""

    def __init__(self, path: Path, text: str | None = None) -> None:
        self.path = Path(path)
        if text is None:
            try:
                text = self.path.read_text()
            except OSError as exc:
                raise YamlFileError(f"{self.path}: cannot read: {exc.strerror}") from None
        try:
            self.root = yaml.compose(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{self.path}:{mark.line + 1}:{mark.column + 1}" if mark else str(self.path)
            raise YamlFileError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None

    def where(self, node: yaml.Node | None) -> str:
        if node is None:
            return str(self.path)
        return f"{self.path}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"

    def error(self, node: yaml.Node | None, message: str) -> YamlFileError:
        return YamlFileError(f"{self.where(node)}: {message}")

    def mapping(
        self, node: yaml.Node | None, what: str, *, allowed: Set[str], required: Set[str] = frozenset()
    ) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping of keys to values")
        out: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if key not in allowed:
                raise self.error(
                    key_node, f"unknown key {key!r} in {what}; expected one of {', '.join(sorted(allowed))}"
                )
            if key in out:
                raise self.error(key_node, f"{key!r} appears twice in {what}")
            out[key] = value_node
        missing = sorted(required - out.keys())
        if missing:
            raise self.error(node, f"{what} needs {', '.join(repr(m) for m in missing)}")
        return out

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, f"{what} must be a list")
        return list(node.value)

    def value(self, node: yaml.Node) -> Any:
        return yaml.safe_load(yaml.serialize(node))

    def string(self, node: yaml.Node, what: str) -> str:
        value = self.value(node)
        if not isinstance(value, str) or not value:
            raise self.error(node, f"{what} must be a non-empty string, got {value!r}")
        return value

    def number(self, node: yaml.Node, what: str, *, kind: type = float, minimum: float | None = None) -> Any:
        value = self.value(node)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (kind is int and not isinstance(value, int))
        ):
            raise self.error(node, f"{what} must be {'an integer' if kind is int else 'a number'}, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(node, f"{what} must be >= {minimum}, got {value!r}")
        return kind(value)

    def boolean(self, node: yaml.Node, what: str) -> bool:
        value = self.value(node)
        if not isinstance(value, bool):
            raise self.error(node, f"{what} must be true or false, got {value!r}")
        return value

    def strings(self, node: yaml.Node, what: str) -> list[str]:
        return [self.string(item, f"each entry of {what}") for item in self.sequence(node, what)]

    def string_map(self, node: yaml.Node, what: str) -> dict[str, str]:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping of names to values")
        out: dict[str, str] = {}
        for key_node, value_node in node.value:
            value = self.value(value_node)
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise self.error(value_node, f"{what}.{key_node.value} must be a string or number, got {value!r}")
            out[str(key_node.value)] = str(value)
        return out

"""Reading YAML nodes with positions, so every settings error names file:line:column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainwarden.errors import ConfigError


def where(path: Path, node: yaml.Node | None) -> str:
    if node is None:
        return str(path)
    return f"{path}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"


def mapping(path: Path, node: yaml.Node, allowed: set[str], what: str) -> dict[str, yaml.Node]:
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{where(path, node)}: {what} must be a mapping of keys to values")
    out: dict[str, yaml.Node] = {}
    for key_node, value_node in node.value:
        key = key_node.value
        if key not in allowed:
            raise ConfigError(
                f"{where(path, key_node)}: unknown key {key!r} in {what}; expected one of {', '.join(sorted(allowed))}"
            )
        out[key] = value_node
    return out


def scalar(path: Path, node: yaml.Node, kind: type, what: str) -> Any:
    value = yaml.safe_load(yaml.serialize(node))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ConfigError(f"{where(path, node)}: {what} must be a {kind.__name__}, got {value!r}")
    if kind in (int, float) and isinstance(value, int | float) and value <= 0:
        raise ConfigError(f"{where(path, node)}: {what} must be positive, got {value!r}")
    return value

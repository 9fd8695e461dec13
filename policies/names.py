"""A rule's metric names and the values it reads: `loss` matches `train/loss`, `train_loss`, `loss`, ...

A rule names the canonical metric; it matches the first spelling present in an event. The spellings
come from the one vocabulary in `trainwarden.core.metrics` (shared with the agent); a policy file
may add aliases of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from math import isfinite
from typing import Any

from trainwarden.core.metrics import spellings


def expand(names: Iterable[str], extra: Mapping[str, tuple[str, ...]] | None = None) -> tuple[str, ...]:
    """Canonical names -> every spelling to look for, in order, without repeats."""
    out: dict[str, None] = {}
    for name in names:
        for alias in (extra or {}).get(name, ()) or spellings(name):
            out[alias] = None
        out.setdefault(name, None)
    return tuple(out)


def pick(data: Mapping[str, Any], names: tuple[str, ...]) -> tuple[str, Any] | None:
    """The first of `names` present in `data`, with its value."""
    for name in names:
        if name in data:
            return name, data[name]
    return None


def number(value: Any) -> float | None:
    """A metric value as a float (bools count as 0/1); None for anything that is not a number."""
    kind = type(value)
    if kind is float:
        return value
    if kind is int or kind is bool:
        return float(value)
    return None


def finite(value: Any) -> float | None:
    """A finite metric value as a float, else None (one call: it is on every rule's hot path)."""
    kind = type(value)
    if kind is float:
        return value if isfinite(value) else None
    if kind is int or kind is bool:
        return float(value)
    return None


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return str(value) if not math.isfinite(value) else f"{value:.4g}"
    return str(value)

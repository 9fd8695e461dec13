"""Metric names and their aliases: `loss` matches `train/loss`, `train_loss`, `loss`, ...

Trainers and loggers spell the same quantity many ways. A rule names the canonical metric; it
matches the first alias present in an event. A policy file may add aliases of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from math import isfinite
from typing import Any

BUILTIN_ALIASES: dict[str, tuple[str, ...]] = {
    "loss": ("loss", "train/loss", "train_loss", "train.loss", "training_loss"),
    "val_loss": ("val_loss", "val/loss", "eval_loss", "eval/loss", "valid_loss", "validation_loss", "val.loss"),
    "val_ppl": ("val_ppl", "val/ppl", "eval_ppl", "eval/ppl", "val/perplexity", "eval/perplexity", "ppl"),
    "grad_norm": ("grad_norm", "train/grad_norm", "gradient_norm", "grad-norm", "gnorm"),
    "lr": ("lr", "learning_rate", "train/lr", "train/learning_rate"),
    "tokens_per_s": ("tokens_per_s", "tokens_per_sec", "tok/s", "throughput", "train/tokens_per_second"),
    "gpu_util": ("gpu_util", "util", "utilization", "gpu.util", "gpu_utilization"),
    "gpu_temp": ("gpu_temp", "temp", "temperature", "gpu.temp", "temperature_c"),
    "alive": ("alive", "process_alive"),
}


def expand(names: Iterable[str], extra: Mapping[str, tuple[str, ...]] | None = None) -> tuple[str, ...]:
    """Canonical names -> every spelling to look for, in order, without repeats."""
    out: dict[str, None] = {}
    for name in names:
        for alias in (extra or {}).get(name, ()) or BUILTIN_ALIASES.get(name, (name,)):
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

"""Durations and persistence (`for:`) as policy files write them: `30s`, `10m`, `1h30m`, `3 samples`.

Parsing is strict on purpose: `10 mins` is an error that says what is expected, not a silent zero.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_RE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$")
_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_SAMPLES_RE = re.compile(r"^(\d+)\s*samples?$")

DURATION_HINT = "a duration like 30s, 10m, 2h or 1h30m"
PERSISTENCE_HINT = "a number of samples (3, or '3 samples') or a duration like 30s, 10m, 2h"


def parse_duration(text: str) -> float | None:
    """Seconds, or None when `text` is not a duration."""
    compact = text.strip()
    if not _DURATION_RE.match(compact):
        return None
    return sum(float(n) * UNITS[unit] for n, unit in _PART_RE.findall(compact))


def fmt_duration(seconds: float) -> str:
    """The inverse, for messages: 1800 -> '30m', 5400 -> '1h30m', 42.5 -> '42s'."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m else "")
    return out + (f"{sec}s" if sec and not h else "")


@dataclass(frozen=True, slots=True)
class Persistence:
    """How long a condition must hold before a rule fires: N samples in a row, or a duration."""

    samples: int = 1
    seconds: float = 0.0

    def met(self, count: int, held_s: float) -> bool:
        return count >= self.samples and held_s >= self.seconds

    def describe(self) -> str:
        if self.seconds:
            return fmt_duration(self.seconds)
        return f"{self.samples} sample" + ("s" if self.samples != 1 else "")


def parse_persistence(value: object) -> Persistence | None:
    """`3` / `'3 samples'` -> 3 samples; `'10m'` -> 600 s; None when invalid (including < 1 sample)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Persistence(samples=value) if value >= 1 else None
    if not isinstance(value, str):
        return None
    m = _SAMPLES_RE.match(value.strip())
    if m:
        n = int(m.group(1))
        return Persistence(samples=n) if n >= 1 else None
    seconds = parse_duration(value)
    if seconds is None or seconds <= 0:
        return None
    return Persistence(seconds=seconds)

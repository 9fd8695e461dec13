"""Durations: the one grammar and the one format for every place a user writes or reads one (policy
files' `for:` / `duration:` / `startup:`, `/snooze`, `--since`, `--older-than`, and messages). The grammar
itself lives in core/durations.py (settings files parse it too) and is re-exported here.

Progress (`parse_span`, `parse_persistence`): where a policy measures a phase or a wait, `500 steps`
(the metric `step`) or `3 evals` (metric events holding a validation metric) count the run's own
progress instead of time, so that a backtest (no real clock) and a live run decide alike.

Format (`fmt_duration`): the largest unit and the next one, zero-padded, the rest rounded away:
`42s`, `5m07s`, `1h30m`, `1d01h`, `7d`. Every formatted duration parses back (`parse_duration`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainwarden.core.durations import DURATION_HINT, duration_problem, fmt_duration, parse_duration

__all__ = ["DURATION_HINT", "PERSISTENCE_HINT", "SPAN_HINT", "Persistence", "Span", "duration_problem", "fmt_duration",
           "parse_duration", "parse_persistence", "parse_span"]  # fmt: skip

_COUNT_RE = re.compile(r"^(\d+)\s*(samples?|steps?|evals?)$")

SPAN_HINT = "a duration like 30s, 10m, 2h or 1h30m, or progress like '500 steps' or '3 evals'"
PERSISTENCE_HINT = (
    "a number of samples (3, or '3 samples') or a duration like 30s, 10m, 2h, or progress ('500 steps', '3 evals')"
)


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}" + ("s" if n != 1 else "")


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of a run: seconds of its events' time, or its progress in optimizer steps or evals.
    At most one of the three is set; all zero is no span at all."""

    seconds: float = 0.0
    steps: int = 0
    evals: int = 0

    def __bool__(self) -> bool:
        return bool(self.seconds or self.steps or self.evals)

    def within(self, held_s: float, steps: int, evals: int) -> bool:
        """Whether `held_s` seconds, `steps` steps and `evals` evals are still short of the span."""
        return held_s < self.seconds or steps < self.steps or evals < self.evals

    def describe(self) -> str:
        if self.steps:
            return _plural(self.steps, "step")
        if self.evals:
            return _plural(self.evals, "eval")
        return fmt_duration(self.seconds)


def parse_span(value: object) -> Span | None:
    """`'30m'` -> 1800 s; `'500 steps'` -> 500 steps; `'3 evals'` -> 3 evals; None when invalid."""
    if not isinstance(value, str):
        return None
    m = _COUNT_RE.match(value.strip())
    if m:
        n, unit = int(m.group(1)), m.group(2)
        if unit.startswith("sample"):
            return None  # samples of what? a phase or a cooldown counts steps, evals or time
        return Span(steps=n) if unit.startswith("step") else Span(evals=n)
    seconds = parse_duration(value)
    return None if seconds is None else Span(seconds=seconds)


@dataclass(frozen=True, slots=True)
class Persistence:
    """How long a condition must hold before a rule fires: N samples in a row, a duration, or N steps or
    evals of the run's progress while it held."""

    samples: int = 1
    seconds: float = 0.0
    steps: int = 0
    evals: int = 0

    def met(self, count: int, held_s: float, held_steps: int = 0, held_evals: int = 0) -> bool:
        return (
            count >= self.samples and held_s >= self.seconds and held_steps >= self.steps and held_evals >= self.evals
        )

    @property
    def progress(self) -> bool:
        """Whether it counts steps or evals (the engine then remembers where the condition began)."""
        return bool(self.steps or self.evals)

    def describe(self) -> str:
        if self.seconds or self.steps or self.evals:
            return Span(self.seconds, self.steps, self.evals).describe()
        return _plural(self.samples, "sample")


def parse_persistence(value: object) -> Persistence | None:
    """`3` / `'3 samples'` -> 3 samples; `'10m'` -> 600 s; `'500 steps'`, `'3 evals'`; None when invalid
    (including < 1)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Persistence(samples=value) if value >= 1 else None
    if not isinstance(value, str):
        return None
    m = _COUNT_RE.match(value.strip())
    if m:
        n, unit = int(m.group(1)), m.group(2)
        if n < 1:
            return None
        if unit.startswith("sample"):
            return Persistence(samples=n)
        return Persistence(steps=n) if unit.startswith("step") else Persistence(evals=n)
    seconds = parse_duration(value)
    if seconds is None or seconds <= 0:
        return None
    return Persistence(seconds=seconds)

"""A run watched blind: its log grows, yet no training metric comes from any of its sources.

A newcomer's own loop prints `>> it#5 -- L=2.3 ::`: the agent reads every line and finds no loss in any, so
a NaN there is never stopped, and nothing would say so. `Blindness` (pure) follows one run from the lines
its log grows by and whether a poll brought a training metric from any source (the log, the sidecar
`trainwarden.log(...)` file, a structured metric file, W&B). It tells two cases apart:

- output it cannot read: metric-looking lines (a value with decimals, `0.3342`, `L=2.30`, not a percentage,
  a size or a time: `45.5%`, `1.2 GB`, `12.3s`) whose shape (their numbers masked) recurs `RECUR` times.
  When `after_lines` of them or `after_s` seconds of them (at least `MIN_LINES`) go by with no metric, it says
  `unreadable` once (`agent.unreadable_after_lines`, `agent.unreadable_after_s`);
- no training output yet: start-up lines only (`compiling model...`, `Downloading data: 45%`, a banner; and
  progress-bar redraws, never counted). torch.compile, a data download or an index may take many minutes:
  silent until `first_step_s` from the watch's start (`agent.first_step_budget_s`, the stall kind's first-step
  budget too), then `unreadable` once with start-up facts (events.reading.startup_facts), whose advice is about
  start-up, not about how to log metrics.

After that, the first training metric says `readable`. A run read from the start says nothing at all. The line
quoted is the latest metric-looking one (the latest line for start-up), masked by the caller before it goes out
(agent.watcher) and cut (events.reading.sample).

From a log's lines, a training metric is one a rule can judge: a name the vocabulary knows
(`events.metrics.is_known`: `loss`, `val_acc`; not a name the reader keeps only because it recurs, like
the `l` of `L=2.3`). What the training process wrote itself (the sidecar, W&B, a metric file) counts whatever
its names, since they are the run's own choice (`reward`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainwarden.agent.config import FIRST_STEP_BUDGET_S, UNREADABLE_AFTER_LINES, UNREADABLE_AFTER_S
from trainwarden.agent.prefixes import strip_prefix
from trainwarden.agent.tail import Line, LogTail
from trainwarden.core.metrics import is_known
from trainwarden.events.reading import READABLE, UNREADABLE

MIN_LINES = 3  # lines the time budget needs: fewer in a minute is a quiet log, not one read blind
RECUR = 3  # a metric-looking line's shape seen this often is the run's output, not a one-off start-up line
MAX_SHAPES = 1000  # shapes remembered (a start-up printing a new shape a line stays bounded)
SAMPLE_RAW_CHARS = 1000  # of the candidate line kept (masked and cut when it goes out)
# a value with decimals or an exponent, standing alone (not in a version `2.1.0`, not glued to a word), and not
# a progress, size or time figure: `0.3342`, `L=2.30`, `1e-4`; not `45.5%`, `1.2GB`, `1.2 GB`, `12.3s`, `3.4 MB/s`
_VALUE_RE = re.compile(
    r"(?<![\w.])[-+]?(?:\d+\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)(?![\w%/.])"
    r"(?!\s?(?:%|[KMGTP]i?B\b|[kKMG]?B/s|(?:s|ms|sec|secs|seconds|min|mins|minutes|h|hours)\b|it/s|s/it))"
)
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass(frozen=True, slots=True)
class Change:
    status: str  # UNREADABLE | READABLE
    lines: int  # lines counted without a training metric
    span_s: float  # from the first of them to the last (start-up: from the watch's start)
    sample: str | None  # the line to quote, raw: mask it before it goes out
    startup: bool = False  # start-up lines only, past the first-step budget: no output it cannot read


def is_bar(text: str) -> bool:
    """A progress-bar redraw (tqdm, Lightning, Keras): progress, not a line the reader failed to read."""
    return "it/s" in text or "s/it" in text or ("%|" in text and "|" in text[text.index("%|") + 2 :])


def shape(text: str) -> str | None:
    """A metric-looking line's shape (its numbers masked: the same for each step's line); None for a line
    with no metric-looking value (start-up: `compiling model...`, `Downloading data: 45%`)."""
    line = strip_prefix(text)
    return _NUMBER_RE.sub("0", line.strip()) if _VALUE_RE.search(line) else None


def trains(data: Mapping[str, Any]) -> bool:
    """Whether a metric event read from a log holds a training metric a rule can judge."""
    return any(is_known(name) for name in data)


@dataclass(slots=True)
class Blindness:
    after_s: float = UNREADABLE_AFTER_S
    after_lines: int = UNREADABLE_AFTER_LINES
    first_step_s: float = FIRST_STEP_BUDGET_S  # start-up lines only: said after this from `started`
    started: float | None = None  # the watch's start (default: the first poll)
    lines: int = 0  # counted lines (not bars, not blank) seen without a training metric
    shapes: dict[str, tuple[int, float, str]] = field(default_factory=dict)  # shape -> (lines, first seen, latest)
    numeric: int = 0  # lines of a recurring shape: output it cannot read
    numeric_at: float | None = None  # the first of them
    last_at: float | None = None  # the latest of them
    sample: str | None = None  # the latest metric-looking line of a recurring shape
    latest: str | None = None  # the latest counted line (quoted for start-up)
    said: str | None = None  # UNREADABLE once said; READABLE once a metric came after it
    read: bool = False  # a training metric came: nothing more to watch

    def step(self, now: float, texts: Sequence[str], *, metric: bool) -> Change | None:
        """One poll: the lines read and whether any source brought a training metric. The change to say, if any."""
        if self.started is None:
            self.started = now
        if self.read:
            return None
        if metric:
            self.read = True
            if self.said == UNREADABLE:
                self.said = READABLE
                return Change(READABLE, self.lines, self._span(), None)
            return None
        if self.said is not None:
            return None  # said once; only a metric changes it now
        for text in texts:
            if not text.strip() or is_bar(text):
                continue
            self.lines += 1
            self.latest = cut = text[:SAMPLE_RAW_CHARS]  # a 1 MiB line is neither kept nor scanned whole
            self._count(shape(cut), cut, now)
        if self._blind():
            self.said = UNREADABLE
            return Change(UNREADABLE, self.numeric, self._span(), self.sample)
        if self.lines and now - self.started >= self.first_step_s:
            self.said = UNREADABLE
            return Change(UNREADABLE, self.lines, now - self.started, self.latest, startup=True)
        return None

    def _count(self, key: str | None, text: str, now: float) -> None:
        """One metric-looking line: its shape recurs, with other numbers (a banner printed twice is no metric),
        from its `RECUR`th line on, which counts all of them."""
        if key is None or (key not in self.shapes and len(self.shapes) >= MAX_SHAPES):
            return
        n, first, latest = self.shapes.get(key, (0, now, ""))
        if text == latest:
            return
        self.shapes[key] = (n + 1, first, text)
        if n + 1 < RECUR:
            return
        self.numeric += RECUR if n + 1 == RECUR else 1
        self.numeric_at = first if self.numeric_at is None else min(self.numeric_at, first)
        self.last_at = now
        self.sample = text

    def _span(self) -> float:
        return 0.0 if self.numeric_at is None or self.last_at is None else self.last_at - self.numeric_at

    def _blind(self) -> bool:
        if self.numeric >= self.after_lines:
            return True
        return self.numeric >= MIN_LINES and self._span() >= self.after_s

    @property
    def blind(self) -> bool:
        return self.said == UNREADABLE


class SeenTail(LogTail):
    """The run's log tail, keeping the lines of each poll for its `Blindness` until a metric is read (`keep`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keep = True
        self.seen: list[Line] = []

    def poll(self, *args: Any, **kwargs: Any) -> list[Line]:
        lines = super().poll(*args, **kwargs)
        if self.keep:
            self.seen.extend(line for line in lines if not getattr(line, "partial", False))  # completed ones only
        return lines

    def take(self) -> list[str]:
        """The texts seen since the last take."""
        out, self.seen = [line.text for line in self.seen], []
        return out

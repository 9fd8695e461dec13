"""A run watched blind: its log grows, yet no training metric comes from any of its sources.

A newcomer's own loop prints `>> it#5 -- L=2.3 ::`: the agent reads every line and finds no loss in any, so
a NaN there is never stopped, and nothing would say so. `Blindness` (pure) follows one run from the lines
its log grows by and whether a poll brought a training metric from any source (the log, the sidecar
`trainwarden.log(...)` file, a structured metric file, W&B). When `after_lines` lines (progress-bar redraws
not counted: a bar is redrawn ten times a second before a Trainer's first logged step) or `after_s` seconds
of lines (at least `MIN_LINES`: a log that printed a banner and went quiet is not blind, it is silent) go by
with none, it says `unreadable` once; after that, the first training metric says `readable`. A run read from
the start says nothing at all. The line quoted is the latest that looks like a metric line (digits, no bar),
masked by the caller before it goes out (agent.watcher) and cut (events.reading.sample).

From a log's lines, a training metric is one a rule can judge: a name the vocabulary knows
(`events.metrics.is_known`: `loss`, `val_acc`; not a name the reader keeps only because it recurs, like
the `l` of `L=2.3`). What the training process wrote itself (the sidecar, W&B, a metric file) counts whatever
its names, since they are the run's own choice (`reward`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainwarden.agent.config import UNREADABLE_AFTER_LINES, UNREADABLE_AFTER_S
from trainwarden.agent.tail import Line, LogTail
from trainwarden.core.metrics import is_known
from trainwarden.events.reading import READABLE, UNREADABLE

MIN_LINES = 3  # lines the time budget needs: fewer in a minute is a quiet log, not one read blind
SAMPLE_RAW_CHARS = 1000  # of the candidate line kept (masked and cut when it goes out)


@dataclass(frozen=True, slots=True)
class Change:
    status: str  # UNREADABLE | READABLE
    lines: int  # lines counted without a training metric
    span_s: float  # from the first of them to the last
    sample: str | None  # the line to quote, raw: mask it before it goes out


def is_bar(text: str) -> bool:
    """A progress-bar redraw (tqdm, Lightning, Keras): progress, not a line the reader failed to read."""
    return "it/s" in text or "s/it" in text or ("%|" in text and "|" in text[text.index("%|") + 2 :])


def trains(data: Mapping[str, Any]) -> bool:
    """Whether a metric event read from a log holds a training metric a rule can judge."""
    return any(is_known(name) for name in data)


@dataclass(slots=True)
class Blindness:
    after_s: float = UNREADABLE_AFTER_S
    after_lines: int = UNREADABLE_AFTER_LINES
    lines: int = 0  # counted lines (not bars, not blank) seen without a training metric
    seen: int = 0  # every line seen, bars included (the time budget's evidence that the log grows)
    first_at: float | None = None
    last_at: float | None = None
    sample: str | None = None
    said: str | None = None  # UNREADABLE once said; READABLE once a metric came after it
    read: bool = False  # a training metric came: nothing more to watch

    def step(self, now: float, texts: Sequence[str], *, metric: bool) -> Change | None:
        """One poll: the lines read and whether any source brought a training metric. The change to say, if any."""
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
            self.seen += 1
            if self.first_at is None:
                self.first_at = now
            self.last_at = now
            if not text.strip() or is_bar(text):
                continue
            self.lines += 1
            if any(c.isdigit() for c in text) and any(c.isalpha() for c in text):
                self.sample = text[:SAMPLE_RAW_CHARS]
        if self._blind():
            self.said = UNREADABLE
            return Change(UNREADABLE, self.lines, self._span(), self.sample or self._last(texts))
        return None

    def _span(self) -> float:
        return 0.0 if self.first_at is None or self.last_at is None else self.last_at - self.first_at

    def _blind(self) -> bool:
        if self.lines >= self.after_lines:
            return True
        return self.seen >= MIN_LINES and self.lines > 0 and self._span() >= self.after_s

    @staticmethod
    def _last(texts: Sequence[str]) -> str | None:
        return next((t[:SAMPLE_RAW_CHARS] for t in reversed(texts) if t.strip() and not is_bar(t)), None)

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

"""One run's training log as events: tail -> traceback grouping -> metric parsing and tagging.

Event ids are derived from byte offsets, so reading the same bytes again yields the same ids:

| events | producer | seq |
|---|---|---|
| `metric` | `<host>/log/<run>/g<generation>` | byte offset of the line's end |
| `log.line` | `<host>/lines/<run>/g<generation>` | byte offset of the end of the line (or traceback) |

Metrics and notable lines have producers of their own because metric events may be held back
(see `agent.arbiter`) while `log.line` events go out at once; within each producer seqs still
only grow.

One line never costs another: a metric value the events refuse (`step: -1`, see
`events.metrics.value_problem`) is left out of its event, and a line whose handling raises is
skipped alone (counted in `SourceErrors`); the lines after it are read as usual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from trainwarden.agent.blocks import Block, Single, TracebackGrouper
from trainwarden.agent.isolation import SourceErrors
from trainwarden.agent.parse import MAX_LINE_CHARS, fault_of, tag_of
from trainwarden.agent.reading import MetricReader
from trainwarden.agent.tail import Line, LogTail
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.redact import known_secrets, redact_text

BLOCK_IDLE_S = 1.0  # an unfinished traceback is sent after this long without new lines


@dataclass(frozen=True, slots=True)
class Item:
    event: Event
    start: int  # where its first line starts: the agent never saves an offset past a held item
    generation: int
    is_metric: bool
    refused: tuple[str, ...] = ()  # problems of the values left out of a metric event


Secrets = Callable[[], Iterable[str]]  # the secret values to mask, asked for only when text goes out


def line_item(*, run: str, host: str, line: Line, now: float, secrets: Secrets = known_secrets,
              reader: MetricReader | None = None) -> Item | None:  # fmt: skip
    """The event one ordinary line yields (a metric or a notable line), if any. `reader` is the run's (it
    remembers the lines before: see `agent.reading`); without one the line is read as a run's first. A line
    that reports a fault is a `log.line` even when it holds `key=value` pairs (the NCCL watchdog's
    `WorkNCCL(SeqNum=5, ...)`)."""
    tag = fault_of(line.text)
    if tag is None:
        metrics, refused = (reader or MetricReader()).read(line.text)
        if metrics:
            event = make_event(t.METRIC, run=run, host=host, producer=f"{host}/log/{run}/g{line.generation}",
                               seq=line.end, data=metrics, ts=now)  # fmt: skip
            return Item(event, line.start, line.generation, True, tuple(refused))
        tag = tag_of(line.text)
    if tag is None:
        return None
    data = {"tag": tag, "line": redact_text(line.text[:MAX_LINE_CHARS], secrets())}
    event = make_event(t.LOG_LINE, run=run, host=host, producer=f"{host}/lines/{run}/g{line.generation}",
                       seq=line.end, data=data, ts=now)  # fmt: skip
    return Item(event, line.start, line.generation, False)


def block_item(*, run: str, host: str, block: Block, now: float, secrets: Secrets = known_secrets) -> Item:
    end = block.end
    data = {"tag": block.tag(), "line": redact_text(block.text(), secrets()), "lines": len(block.lines) + block.dropped}
    event = make_event(t.LOG_LINE, run=run, host=host, producer=f"{host}/lines/{run}/g{end.generation}",
                       seq=end.end, data=data, ts=now)  # fmt: skip
    return Item(event, block.start, end.generation, False)


class RunLog:
    def __init__(self, *, run: str, host: str, tail: LogTail, block_idle_s: float = BLOCK_IDLE_S,
                 secrets: Secrets | None = None, errors: SourceErrors | None = None) -> None:  # fmt: skip
        self.run = run
        self.secrets: Secrets = secrets or known_secrets  # the run's secrets (agent.watcher), else the agent's
        self.errors = errors or SourceErrors()
        self.host = host
        self.tail = tail
        self.block_idle_s = block_idle_s
        self.grouper = TracebackGrouper()
        self.last_line_at: float | None = None
        self.lines_read = 0
        self._last_bar: dict[str, float | int] | None = None
        self.reader = MetricReader()  # which numbers are metrics, and where in the run (agent.reading)

    @property
    def safe_offset(self) -> int:
        """Where to resume after a restart: before an unfinished traceback, else the tail's offset."""
        pending = self.grouper.pending_start
        return self.tail.offset if pending is None else min(pending, self.tail.offset)

    def poll(self, now: float) -> list[Item]:
        lines = self.tail.poll()
        out: list[Item] = []
        for line in lines:
            try:
                for piece in self.grouper.feed(line):
                    out.extend(self._items(piece, now))
            except Exception as exc:  # this line only: the lines after it are read as usual
                self.errors.failed(f"{self.run} log", exc, detail=f"the line at byte {line.start} is skipped")
        if lines:
            self.last_line_at = now
            self.lines_read += len(lines)
        elif self.last_line_at is not None and now - self.last_line_at >= self.block_idle_s:
            out.extend(self.finish(now))
        return out

    def finish(self, now: float) -> list[Item]:
        """Send an unfinished traceback (nothing more is coming: idle, or the run ended)."""
        return [block_item(run=self.run, host=self.host, block=b, now=now, secrets=self.secrets)
                for b in self.grouper.flush()]  # fmt: skip

    def _items(self, piece: Single | Block, now: float) -> list[Item]:
        if isinstance(piece, Block):
            return [block_item(run=self.run, host=self.host, block=piece, now=now, secrets=self.secrets)]
        line = piece.line
        item = line_item(run=self.run, host=self.host, line=line, now=now, secrets=self.secrets,
                         reader=self.reader)  # fmt: skip
        if item is None:
            return []
        if item.refused:
            self.errors.refused_values(f"{self.run} log", item.refused)
        if item.is_metric and "it/s" in line.text:
            # a progress bar redraws many times a second with the same postfix: keep changes only
            if item.event.data == self._last_bar:
                return []
            self._last_bar = item.event.data
        elif not item.is_metric and (bar := glued_bar(line.text)) is not None:
            # tqdm writes no newline: a fault printed while a bar was drawn is glued to the bar's last redraw
            found = line_item(run=self.run, host=self.host, line=dataclasses.replace(line, text=bar), now=now,
                              secrets=self.secrets, reader=self.reader)  # fmt: skip
            if found is not None and found.is_metric:
                return [found, item]
        return [item]


def glued_bar(text: str) -> str | None:
    """The progress bar at the start of a line that goes on after the bar's `]` (another message glued to the
    redraw: `... 1.42it/s, reduced_train_loss=2.59][E ProcessGroupNCCL.cpp:566] ...`), or None."""
    rate = max(text.find("it/s"), text.find("s/it"))
    end = text.find("]", rate) if rate >= 0 else -1
    return text[: end + 1] if 0 <= end < len(text.rstrip()) - 1 else None

"""One run's training log as events: tail -> traceback grouping -> metric parsing and tagging.

Event ids are derived from byte offsets, so reading the same bytes again yields the same ids:

| events | producer | seq |
|---|---|---|
| `metric` | `<host>/log/<run>/g<generation>` | byte offset of the line's end |
| `log.line` | `<host>/lines/<run>/g<generation>` | byte offset of the end of the line (or traceback) |
| `phase` | `<host>/phases/<run>/g<generation>` | byte offset of the line's end (agent.phases) |

Metrics and notable lines have producers of their own because metric events may be held back
(see `agent.arbiter`) while `log.line` events go out at once; within each producer seqs still
only grow.

A last line without its terminator is read once the writer pauses or ends (agent.tail): a partial line
read early yields its metrics only (no traceback grouping, no tag) and only up to its last finished value
(`settled`); when the line is completed later (the same start), only the values it adds or changes are
published, at the same position, so a line read in two goes never yields a sample twice.

One line never costs another: a metric value the events refuse (`step: -1`, see
`events.metrics.value_problem`) is left out of its event, and a line whose handling raises is
skipped alone (counted in `SourceErrors`); the lines after it are read as usual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from trainwarden.agent.bars import same_value
from trainwarden.agent.blocks import Block, Single, TracebackGrouper
from trainwarden.agent.isolation import SourceErrors
from trainwarden.agent.parse import MAX_LINE_CHARS, fault_of, tag_of
from trainwarden.agent.phases import PhaseTracker
from trainwarden.agent.reading import MetricReader
from trainwarden.agent.state import LogPosition, Partial
from trainwarden.agent.tail import Line, LogTail
from trainwarden.core.redact import known_secrets, redact_text
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event

MAX_PHASE_LINE = 300  # the phase line kept in its event: enough to say which eval or save
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
              reader: MetricReader | None = None, again: bool = False) -> Item | None:  # fmt: skip
    """The event one ordinary line yields (a metric or a notable line), if any. `reader` is the run's (it
    remembers the lines before: see `agent.reading`); without one the line is read as a run's first. A line
    that reports a fault is a `log.line` even when it holds `key=value` pairs (the NCCL watchdog's
    `WorkNCCL(SeqNum=5, ...)`). `again`: the line completes one read before (agent.reading)."""
    tag = fault_of(line.text)
    if tag is None:
        metrics, refused = (reader or MetricReader()).read(line.text, again=again)
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
        self._early: tuple[int, int, dict[str, float | int]] | None = None  # a partial line's: gen, start, data
        self.reader = MetricReader()  # which numbers are metrics, and where in the run (agent.reading)
        self.phases = PhaseTracker()  # an eval or a save the log says began (agent.phases)

    @property
    def safe_offset(self) -> int:
        """Where to resume after a restart: before an unfinished traceback, else the tail's offset."""
        pending = self.grouper.pending_start
        return self.tail.offset if pending is None else min(pending, self.tail.offset)

    def position(self, held: Item | None = None) -> LogPosition:
        """Where to resume after a restart (`held`: the arbiter's first held item), saved with what it covers: the
        fingerprint of the bytes before it, and the partial line starting there whose metrics went out."""
        offset, generation, inode = self.tail.resume
        block = self.grouper.block
        if block is not None and block.end.generation == generation:
            offset = min(offset, block.start)  # before an unfinished traceback
        if held is not None and held.generation == generation:
            offset = min(offset, held.start)
        early = self._early
        partial = None
        if early is not None and early[:2] == (generation, offset) and (held is None or held.start != offset):
            partial = Partial(offset, dict(early[2]))  # published (a held item at its start would not be)
        return LogPosition(offset=offset, generation=generation, inode=inode, fingerprint=self.tail.fingerprint(offset),
                           partial=partial)  # fmt: skip

    def resume(self, position: LogPosition) -> None:
        """Take up a saved partial line: its completion sends only what it adds, at the same position."""
        partial = position.partial
        if partial is not None and partial.start == self.tail.offset == position.offset:
            self._early = (position.generation, partial.start, dict(partial.data))
            step = partial.data.get("step")
            if self.reader.last_step is None and type(step) is int:
                self.reader.last_step = step

    @property
    def behind(self) -> bool:
        """Whether the last poll stopped short of the log's end (agent.tail)."""
        return self.tail.behind

    def poll(self, now: float) -> list[Item]:
        lines = self.tail.poll(now=now)
        out = self._lines(lines, now)
        if lines:
            self.last_line_at = now
            self.lines_read += len(lines)
        elif self.last_line_at is not None and now - self.last_line_at >= self.block_idle_s:
            out.extend(self.finish(now))
        return out

    def _lines(self, lines: list[Line], now: float, *, final: bool = False) -> list[Item]:
        out: list[Item] = []
        for line in lines:
            try:
                if line.partial and not final:  # the writer paused mid-line: its metrics, and nothing else yet
                    out.extend(self._early_items(line, now))
                    continue
                for piece in self.grouper.feed(line):
                    out.extend(self._items(piece, now))
            except Exception as exc:  # this line only: the lines after it are read as usual
                self.errors.failed(f"{self.run} log", exc, detail=f"the line at byte {line.start} is skipped")
        return out

    def finish(self, now: float, *, final: bool = False) -> list[Item]:
        """Send an unfinished traceback (nothing more is coming: idle, or the run ended); `final`: the writer is
        done, so a last line without its terminator is read too."""
        out = self._lines(self.tail.poll(now=now, final=True), now, final=True) if final else []
        return out + [block_item(run=self.run, host=self.host, block=b, now=now, secrets=self.secrets)
                      for b in self.grouper.flush()]  # fmt: skip

    def _early_items(self, line: Line, now: float) -> list[Item]:
        """A partial line read while its writer lives: metrics only, up to its last finished value."""
        text = settled(line.text)
        if not text:
            return []
        item = self._line_item(dataclasses.replace(line, text=text), now)
        return self._deduped(item, line) if item is not None and item.is_metric else []

    def _line_item(self, line: Line, now: float) -> Item | None:
        early = self._early
        again = early is not None and early[:2] == (line.generation, line.start)
        if early is not None and not again:
            self._early = None  # a line after the partial one: the partial was complete as read
        item = line_item(run=self.run, host=self.host, line=line, now=now, secrets=self.secrets, reader=self.reader,
                         again=again)  # fmt: skip
        if item is not None and item.refused:
            self.errors.refused_values(f"{self.run} log", item.refused)
        return item

    def _deduped(self, item: Item, line: Line) -> list[Item]:
        """A metric item of a line read in parts: the values not published from its earlier part."""
        early = self._early
        sent = early[2] if early is not None and early[:2] == (line.generation, line.start) else {}
        data = item.event.data
        self._early = (line.generation, line.start, {**sent, **data}) if line.partial else None
        if not sent:
            return [item]
        new = {k: v for k, v in data.items() if k in POSITION_KEYS or not same_value(sent.get(k, _MISSING), v)}
        if not set(new) - POSITION_KEYS:
            return []  # all it holds was published from the part read before
        return [dataclasses.replace(item, event=dataclasses.replace(item.event, data=new))]

    def _items(self, piece: Single | Block, now: float) -> list[Item]:
        if isinstance(piece, Block):
            return [block_item(run=self.run, host=self.host, block=piece, now=now, secrets=self.secrets)]
        line = piece.line
        item = self._line_item(line, now)
        if item is not None and item.is_metric:
            self.phases.step(item.event.data.get("step"))
            items = self._deduped(item, line) if self._early is not None else [item]
            bar = glued_bar(line.text)  # Lightning prints `... saving model to` right after the bar's redraw
            return items + self._phase_item(line, now, line.text[len(bar) :]) if bar is not None else items
        phase = self._phase_item(line, now)
        if item is None:
            return phase
        if (bar := glued_bar(line.text)) is not None:
            # tqdm writes no newline: a fault printed while a bar was drawn is glued to the bar's last redraw
            found = line_item(run=self.run, host=self.host, line=dataclasses.replace(line, text=bar), now=now,
                              secrets=self.secrets, reader=self.reader)  # fmt: skip
            if found is not None and found.is_metric:
                return [found, item, *phase]
        self._early = None
        return [item, *phase]

    def _phase_item(self, line: Line, now: float, text: str | None = None) -> list[Item]:
        """A `phase` event when the line (or `text`, the part of it after a bar) begins an eval or a save, or ends
        a save (agent.phases)."""
        found = self.phases.line(line.text if text is None else text)
        if found is None:
            return []
        text = redact_text(line.text[:MAX_PHASE_LINE], self.secrets())
        producer = f"{self.host}/phases/{self.run}/g{line.generation}"
        event = make_event(t.PHASE, run=self.run, host=self.host, producer=producer, seq=line.end,
                           data={"phase": found[0], "started": found[1], "line": text}, ts=now)  # fmt: skip
        return [Item(event, line.start, line.generation, False)]


POSITION_KEYS = frozenset({"step", "epoch"})
_MISSING = object()


def settled(text: str) -> str:
    """A partial line up to its last finished value: a number at its very end may still grow (`loss=1` of
    `loss=1.25`), so it is left for the completed line; a word (`nan`, `inf`) or a closing `]` or `}` is kept."""
    end = len(text.rstrip())
    last = text[end - 1 : end]
    if not (last.isdigit() or last == "." or (last in "+-eE" and text[end - 2 : end - 1].isdigit())):
        return text
    cut = end
    while cut > 0 and not text[cut - 1].isspace() and text[cut - 1] not in ",=:|'\"":
        cut -= 1
    while cut > 0 and text[cut - 1] in ",=:|'\" \t":
        cut -= 1  # the separator before the value goes too, and the name with it: no pair is half read
    while cut > 0 and not text[cut - 1].isspace() and text[cut - 1] not in ",|{":
        cut -= 1
    return text[:cut].rstrip()


def glued_bar(text: str) -> str | None:
    """The progress bar at the start of a line that goes on after the bar's `]` (another message glued to the
    redraw: `... 1.42it/s, reduced_train_loss=2.59][E ProcessGroupNCCL.cpp:566] ...`), or None."""
    rate = max(text.find("it/s"), text.find("s/it"))
    end = text.find("]", rate) if rate >= 0 else -1
    return text[: end + 1] if 0 <= end < len(text.rstrip()) - 1 else None

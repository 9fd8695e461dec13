"""Group a Python traceback's lines into one block, so it becomes one `log.line` event.

A block opens at `Traceback (most recent call last):`, takes the indented frame lines, and ends
with the first unindented line (the exception, `RuntimeError: CUDA out of memory ...`). Chained
exceptions (`During handling of the above exception ...`, `The above exception was the direct
cause ...`) continue the same block. A block whose end has not been seen is closed when an
ordinary line arrives after its exception line, when nothing arrives for a while (`flush`), or at
generation changes. Pure: no I/O, no clock (the caller passes `now`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainwarden.agent.parse import MAX_LINE_CHARS, strongest, tag_of
from trainwarden.agent.prefixes import strip_prefix
from trainwarden.agent.tail import Line

TRACEBACK_START = "Traceback (most recent call last)"
CHAIN_MARKERS = ("During handling of the above exception", "The above exception was the direct cause")
MAX_BLOCK_LINES = 400  # lines kept while a block is open; the middle of a longer one is dropped
HEAD_LINES, TAIL_LINES = 40, 60  # what a long block keeps


@dataclass(slots=True)
class Block:
    lines: list[Line] = field(default_factory=list)
    dropped: int = 0
    ended: bool = False  # its exception line was seen; a chained exception may still follow

    @property
    def start(self) -> int:
        return self.lines[0].start

    @property
    def end(self) -> Line:
        return self.lines[-1]

    def add(self, line: Line) -> None:
        if len(self.lines) >= MAX_BLOCK_LINES:
            del self.lines[HEAD_LINES]
            self.dropped += 1
        self.lines.append(line)

    def text(self) -> str:
        texts = [strip_prefix(line.text)[:MAX_LINE_CHARS] for line in self.lines]
        if len(texts) > HEAD_LINES + TAIL_LINES or self.dropped:
            omitted = self.dropped + len(texts) - HEAD_LINES - TAIL_LINES
            texts = [*texts[:HEAD_LINES], f"... {omitted} lines omitted ...", *texts[-TAIL_LINES:]]
        return "\n".join(texts)

    def tag(self) -> str:
        tags = [tag for line in self.lines if (tag := tag_of(line.text)) is not None]
        return strongest(tags) if tags else "traceback"


@dataclass(frozen=True, slots=True)
class Single:
    """An ordinary line, passed through in order."""

    line: Line


class TracebackGrouper:
    """Feed lines in order; get back, in the same order, ordinary lines and finished blocks."""

    def __init__(self) -> None:
        self.block: Block | None = None

    @property
    def pending_start(self) -> int | None:
        """Offset of the first line of an unfinished block (the agent must not save offsets past it)."""
        return None if self.block is None else self.block.start

    def feed(self, line: Line) -> list[Single | Block]:
        out: list[Single | Block] = []
        block = self.block
        if block is not None and line.generation != block.end.generation:
            out.append(self._close())
            block = None
        if block is None:
            # most lines: one substring test; a prefix is stripped only where a traceback may start
            if TRACEBACK_START in line.text and strip_prefix(line.text).startswith(TRACEBACK_START):
                self.block = Block([line])
            else:
                out.append(Single(line))
            return out
        text = strip_prefix(line.text)
        if block.ended:
            if text.startswith(TRACEBACK_START):
                block.add(line)
                block.ended = False
            elif not text.strip() or text.startswith(CHAIN_MARKERS):
                block.add(line)
            else:
                out.append(self._close())
                out.extend(self.feed(line))
            return out
        block.add(line)
        if text and not text[0].isspace() and not text.startswith(TRACEBACK_START):
            block.ended = True
        return out

    def flush(self) -> list[Block]:
        """Close an open block (nothing more came, or the run ended)."""
        return [] if self.block is None else [self._close()]

    def _close(self) -> Block:
        block = self.block
        assert block is not None
        self.block = None
        while len(block.lines) > 1 and not block.end.text.strip():
            block.lines.pop()  # blank lines kept while waiting for a chained exception
        return block

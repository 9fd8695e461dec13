"""Follow a growing log file by byte offset: complete lines only, rotation and truncation detected.

A line ends at `\\n`, `\\r\\n` or a bare `\\r` (tqdm and Lightning redraw their progress bar with
`\\r`, so each redraw is a line of its own). A `\\r` that is the last byte read waits for the next
byte, so `\\r\\n` split across two reads is still one terminator: line boundaries depend on the
bytes alone, never on when they were read, which keeps event seqs (derived from offsets) stable.

A last line without its terminator is read once the writer pauses (`SETTLE_S` without growth, for a
caller that passes `now`) or is done (`final`): a NaN printed without a newline, the bar being drawn.
It comes back once as a `partial` Line and the offset stays at its start, so the completed line is
read again later, with the same `start`: the reader of the lines (agent.logsource) tells a completion
from a new line by it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from trainwarden.agent import access

READ_CHUNK = 1 << 20  # bytes read per poll; also the longest line kept whole
SETTLE_S = 1.0  # a last line that has not grown for this long is read without its terminator


def open_if_changed(path: Path, *, inode: int | None, offset: int) -> BinaryIO | None:
    """`path` opened for reading, or None when it is missing or still the file `inode` at size `offset`:
    nothing new costs one stat and no open (most polls of a quiet file end here)."""
    try:
        quick = os.stat(path)
    except FileNotFoundError:
        return None
    if quick.st_ino == inode and quick.st_size == offset:
        return None
    try:
        return open(path, "rb")
    except FileNotFoundError:
        return None


@dataclass(frozen=True, slots=True)
class Line:
    start: int  # byte offset of the line's first byte
    end: int  # byte offset just past its terminator: a stable, replayable position
    text: str
    generation: int = 0
    partial: bool = False  # no terminator yet (the writer paused or is done): `end` is past its last byte


class LogTail:
    """Reads lines appended to `path` since `offset`.

    - A partial last line stays unread until its terminator arrives, or until it has not grown for
      `settle_s` (polls given `now`), or the caller says the writer is done (`final`): then it is
      returned once as a `partial` Line (again only if it grows), and complete when its terminator comes.
    - Truncation (copytruncate, or a relaunch overwriting the log): the file is shorter than what was
      read; reading restarts at 0 and `generation` goes up.
    - Rename rotation (`mv train.log train.log.1`, then a new `train.log`): the path now names
      another inode. The old file is found again by its inode among the log's siblings and read
      to its end (a partial last line included), then the new file is followed from 0 with the
      next generation. The same happens after an agent restart, since the inode is saved.
    - Invalid UTF-8 is replaced (U+FFFD); a line longer than `max_bytes` is cut, not stalled on.

    The file is opened for each poll that has something to read and closed again: no descriptor is held.
    """

    def __init__(self, path: Path, *, offset: int = 0, generation: int = 0, inode: int | None = None,
                 settle_s: float = SETTLE_S) -> None:  # fmt: skip
        self.path = Path(path)
        self.offset = offset  # everything before this was returned as complete lines
        self.generation = generation
        self.inode = inode  # inode of the file being read; None until first read
        self.settle_s = settle_s
        self.read_to = offset  # the size seen at the last read: the bytes from `offset` on are a partial line
        self._grew_at: float | None = None  # when `read_to` last grew, by the caller's clock
        self._partial_sent: tuple[int, int, int, bool] | None = None  # generation, start, end, final: the last partial
        self.behind = False  # the last poll read a full chunk: more may be waiting (the agent reads on at once)

    @property
    def exists(self) -> bool:
        return access.exists(self.path)  # a directory it may not enter: not there, for now

    def pending(self) -> bool:
        """Whether a partial last line was seen and not returned as it stands."""
        sent = self._partial_sent
        return self.read_to > self.offset and (sent is None or sent[:3] != (self.generation, self.offset, self.read_to))

    def poll(self, *, max_bytes: int = READ_CHUNK, now: float | None = None, final: bool = False) -> list[Line]:
        """New complete lines; with `now`, also a partial last line that has settled; with `final`, any."""
        self.behind = False
        due = final or (self.pending() and self._settled(now))
        f = open_if_changed(self.path, inode=self.inode, offset=self.offset if due else self.read_to)
        if f is None:
            return []
        with f:
            st = os.fstat(f.fileno())
            if self.inode is None:
                self.inode = st.st_ino
            elif st.st_ino != self.inode:
                drained = self._drain_rotated(max_bytes)
                if drained is not None:
                    return drained
                self._restart(st.st_ino)
            if st.st_size < self.read_to:
                self._restart(st.st_ino)
            return self._read(f, max_bytes, final=final, now=now)

    def _settled(self, now: float | None) -> bool:
        return now is not None and self._grew_at is not None and now - self._grew_at >= self.settle_s

    def _drain_rotated(self, max_bytes: int) -> list[Line] | None:
        """Lines left in the renamed old file, or None once it is read to its end (or gone)."""
        assert self.inode is not None
        old = _find_by_inode(self.path, self.inode)
        if old is None:
            return None
        with open(old, "rb") as f:
            lines = self._read(f, max_bytes, final=True, drain=True)
        return lines or None

    def _restart(self, inode: int) -> None:
        self.offset = self.read_to = 0
        self.generation += 1
        self.inode = inode
        self._grew_at = self._partial_sent = None

    def _read(self, f: BinaryIO, max_bytes: int, *, final: bool, now: float | None = None,
              drain: bool = False) -> list[Line]:  # fmt: skip
        """Lines from `offset`; `drain`: the file will not grow (a rotated one), so its last line is complete."""
        f.seek(self.offset)
        chunk = f.read(max_bytes)
        if not chunk:
            return []
        self.behind = len(chunk) == max_bytes
        if not drain and self.offset + len(chunk) > self.read_to:
            self.read_to = self.offset + len(chunk)
            self._grew_at = now
        parts = chunk.splitlines(keepends=True)
        partial = None
        if not drain and not parts[-1].endswith(b"\n"):
            partial = parts.pop()  # a partial line, or a lone '\r' that may still become '\r\n'
        if not parts and partial is not None and len(chunk) == max_bytes:
            parts, partial = [partial], None  # one line longer than max_bytes: cut it rather than stall
        lines: list[Line] = []
        pos = self.offset
        gen = self.generation
        for raw in parts:
            end = pos + len(raw)
            lines.append(Line(pos, end, raw.rstrip(b"\r\n").decode("utf-8", "replace"), gen))
            pos = end
        self.offset = pos
        if drain:
            self.read_to = pos
        if partial is not None and (final or self._settled(now)):
            sent = (gen, pos, pos + len(partial), final)
            last = self._partial_sent
            # once as it stands (again when it has grown), and once more when the writer is done
            if last is None or last[:3] != sent[:3] or (final and not last[3]):
                self._partial_sent = sent
                lines.append(Line(pos, sent[2], partial.rstrip(b"\r\n").decode("utf-8", "replace"), gen, True))
        return lines


def _find_by_inode(path: Path, inode: int) -> Path | None:
    """The sibling of `path` (train.log.1, train.log-20260101, ...) that is the file we were reading."""
    try:
        with os.scandir(path.parent) as entries:
            for entry in entries:
                if entry.name.startswith(path.name) and entry.inode() == inode and entry.is_file():
                    return Path(entry.path)
    except OSError:
        return None
    return None

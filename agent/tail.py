"""Follow a growing log file by byte offset: complete lines only, rotation and truncation detected.

A line ends at `\\n`, `\\r\\n` or a bare `\\r` (tqdm and Lightning redraw their progress bar with
`\\r`, so each redraw is a line of its own). A `\\r` that is the last byte read waits for the next
byte, so `\\r\\n` split across two reads is still one terminator: line boundaries depend on the
bytes alone, never on when they were read, which keeps event seqs (derived from offsets) stable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

READ_CHUNK = 1 << 20  # bytes read per poll; also the longest line kept whole


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


class LogTail:
    """Reads lines appended to `path` since `offset`.

    - A partial last line stays unread until its terminator arrives.
    - Truncation (copytruncate, or a relaunch overwriting the log): the file is shorter than the
      offset; reading restarts at 0 and `generation` goes up.
    - Rename rotation (`mv train.log train.log.1`, then a new `train.log`): the path now names
      another inode. The old file is found again by its inode among the log's siblings and read
      to its end (a partial last line included), then the new file is followed from 0 with the
      next generation. The same happens after an agent restart, since the inode is saved.
    - Invalid UTF-8 is replaced (U+FFFD); a line longer than `max_bytes` is cut, not stalled on.

    The file is opened for each poll and closed again: no descriptor is held between polls.
    """

    def __init__(self, path: Path, *, offset: int = 0, generation: int = 0, inode: int | None = None) -> None:
        self.path = Path(path)
        self.offset = offset  # everything before this was returned as complete lines
        self.generation = generation
        self.inode = inode  # inode of the file being read; None until first read

    @property
    def exists(self) -> bool:
        return self.path.exists()

    def poll(self, *, max_bytes: int = READ_CHUNK) -> list[Line]:
        f = open_if_changed(self.path, inode=self.inode, offset=self.offset)
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
            if st.st_size < self.offset:
                self._restart(st.st_ino)
            return self._read(f, max_bytes, final=False)

    def _drain_rotated(self, max_bytes: int) -> list[Line] | None:
        """Lines left in the renamed old file, or None once it is read to its end (or gone)."""
        assert self.inode is not None
        old = _find_by_inode(self.path, self.inode)
        if old is None:
            return None
        with open(old, "rb") as f:
            lines = self._read(f, max_bytes, final=True)
        return lines or None

    def _restart(self, inode: int) -> None:
        self.offset = 0
        self.generation += 1
        self.inode = inode

    def _read(self, f: BinaryIO, max_bytes: int, *, final: bool) -> list[Line]:
        f.seek(self.offset)
        chunk = f.read(max_bytes)
        if not chunk:
            return []
        parts = chunk.splitlines(keepends=True)
        if not final and not parts[-1].endswith(b"\n"):
            parts.pop()  # a partial line, or a lone '\r' that may still become '\r\n'
        if not parts and len(chunk) == max_bytes:
            parts = [chunk]  # one line longer than max_bytes: cut it rather than stall
        lines: list[Line] = []
        pos = self.offset
        gen = self.generation
        for raw in parts:
            end = pos + len(raw)
            lines.append(Line(pos, end, raw.rstrip(b"\r\n").decode("utf-8", "replace"), gen))
            pos = end
        self.offset = pos
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

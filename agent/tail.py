"""Follow a growing log file by byte offset: complete lines only, truncation detected."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

READ_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Line:
    end: int  # byte offset just past the line's newline: a stable, replayable position
    text: str


class LogTail:
    """Reads lines appended to `path` since `offset`.

    A partial last line stays buffered until its newline arrives. When the file shrinks below the
    offset (copytruncate rotation, or a restarted run overwriting its log) reading restarts at 0 and
    `generation` goes up, so positions from the old content are never confused with new ones.
    """

    def __init__(self, path: Path, *, offset: int = 0, generation: int = 0) -> None:
        self.path = Path(path)
        self.offset = offset  # everything before this was returned as complete lines
        self.generation = generation

    def poll(self, *, max_bytes: int = READ_CHUNK) -> list[Line]:
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < self.offset:
                    self.offset = 0
                    self.generation += 1
                if size == self.offset:
                    return []
                f.seek(self.offset)
                chunk = f.read(max_bytes)
        except FileNotFoundError:
            return []
        lines: list[Line] = []
        pos = self.offset
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                break
            raw = chunk[start:nl]
            pos += nl + 1 - start
            start = nl + 1
            lines.append(Line(end=pos, text=raw.decode("utf-8", "replace").rstrip("\r")))
        if not lines and len(chunk) == max_bytes:
            # A single line longer than max_bytes: cut it rather than stall forever.
            pos += len(chunk)
            lines.append(Line(end=pos, text=chunk.decode("utf-8", "replace")))
        self.offset = pos
        return lines

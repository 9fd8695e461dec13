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

A file is known as log shippers know it (Filebeat's filestream, fluent-bit's tail): by its inode and a
fingerprint of the bytes before the offset (`fingerprint_of`), saved with the offset. A renamed log is kept
open while its writer may still write to it (`rotate_wait_s`, see `LogTail`).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from trainwarden.agent import access, procfs
from trainwarden.agent.config import ROTATE_WAIT_S

log = logging.getLogger(__name__)

READ_CHUNK = 1 << 20  # bytes read per poll; also the longest line kept whole
SETTLE_S = 1.0  # a last line that has not grown for this long is read without its terminator
FINGERPRINT_HEAD = 1024  # bytes from the file's start in its fingerprint ...
FINGERPRINT_BEFORE = 256  # ... and bytes just before the offset: a relaunch printing the same banner still differs


def fingerprint_of(f: BinaryIO, offset: int) -> str | None:
    """What the bytes before `offset` of the open file `f` look like (its first KiB and the bytes just before the
    offset), or None when it holds fewer than `offset` bytes: saved with the offset, so a file truncated or
    replaced while the agent was down (copytruncate, a relaunch) is told from the one it read."""
    if offset <= 0:
        return ""
    head = os.pread(f.fileno(), min(offset, FINGERPRINT_HEAD), 0)
    before = min(offset, FINGERPRINT_BEFORE)
    tail = os.pread(f.fileno(), before, offset - before)
    if len(head) < min(offset, FINGERPRINT_HEAD) or len(tail) < before:
        return None
    return hashlib.sha1(head + b"\0" + tail, usedforsecurity=False).hexdigest()


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
    - Rename rotation (`mv train.log train.log.1`, then a new `train.log`; logrotate's `create`): the
      path now names another inode. The old file is found again by its inode among the log's siblings
      and kept open (`rotated`): a writer holding its descriptor (`>> train.log`, `tee`, a FileHandler)
      goes on writing into it. The new file is followed from 0 with the next generation; each poll reads
      the old one first. The old one is read to its end (a partial last line included) and closed once it
      has not grown for `rotate_wait_s` and no process holds it open for writing (`procfs.writing`), or
      when the writer is done (`final`); at once for a caller without a clock. The same happens after an
      agent restart, since the inode is saved (`resume`).
    - A saved position is checked at the first poll against the saved `fingerprint`: a file truncated
      and grown again, or replaced, while the agent was down is read from 0 with the next generation.
    - Invalid UTF-8 is replaced (U+FFFD); a line longer than `max_bytes` is cut, not stalled on.

    The file is opened for each poll that has something to read and closed again: no descriptor is held,
    but a renamed file's while it may still grow.
    """

    def __init__(self, path: Path, *, offset: int = 0, generation: int = 0, inode: int | None = None,
                 settle_s: float = SETTLE_S, fingerprint: str | None = None, rotate_wait_s: float = ROTATE_WAIT_S,
                 writing: Callable[[int, int], bool] = procfs.writing) -> None:  # fmt: skip
        self.path = Path(path)
        self.offset = offset  # everything before this was returned as complete lines
        self.generation = generation
        self.inode = inode  # inode of the file being read; None until first read
        self.settle_s = settle_s
        self.read_to = offset  # the size seen at the last read: the bytes from `offset` on are a partial line
        self._grew_at: float | None = None  # when `read_to` last grew, by the caller's clock
        self._partial_sent: tuple[int, int, int, bool] | None = None  # generation, start, end, final: the last partial
        self.behind = False  # the last poll read a full chunk: more may be waiting (the agent reads on at once)
        self.rotate_wait_s = rotate_wait_s
        self.writing = writing  # whether a process holds a file (device, inode) open for writing
        self.rotated: Renamed | None = None  # the renamed file, read while its writer may still write
        self._expect = fingerprint  # the saved position's, checked at the first poll
        self._fingerprinted: tuple[tuple[int | None, int], str | None] | None = None

    @property
    def exists(self) -> bool:
        return access.exists(self.path)  # a directory it may not enter: not there, for now

    def pending(self) -> bool:
        """Whether a partial last line was seen and not returned as it stands."""
        sent = self._partial_sent
        return self.read_to > self.offset and (sent is None or sent[:3] != (self.generation, self.offset, self.read_to))

    @property
    def resume(self) -> tuple[int, int, int | None]:
        """Offset, generation and inode to resume from after a restart: the renamed file's while it is read."""
        held = self.rotated
        return (self.offset, self.generation, self.inode) if held is None else held.resume

    def fingerprint(self, offset: int) -> str | None:
        """The fingerprint of the bytes before `offset` in the file `resume` names (None when it cannot be taken:
        the file gone or shorter, already replaced), worked out again only when the position moved."""
        inode = self.resume[2]
        if self._fingerprinted is not None and self._fingerprinted[0] == (inode, offset):
            return self._fingerprinted[1]
        got: str | None = None
        try:
            if self.rotated is not None:
                got = fingerprint_of(self.rotated.file, offset)
            else:
                with open(self.path, "rb") as f:
                    got = fingerprint_of(f, offset) if os.fstat(f.fileno()).st_ino == inode else None
        except OSError:
            got = None
        self._fingerprinted = ((inode, offset), got)
        return got

    def close(self) -> None:
        """Let go of a renamed file still held, going back to the position in it (`resume`, what the state file
        says): a later poll finds it again by its inode, and reads the new file again from its start."""
        held = self.rotated
        if held is not None:
            self._release()
            self.offset, self.generation, self.inode, self.read_to = (
                held.offset,
                held.generation,
                held.inode,
                held.read_to,
            )
            self._grew_at, self._partial_sent = held._grew_at, held._partial_sent

    def _release(self) -> None:
        if self.rotated is not None:
            self.rotated.file.close()
            self.rotated = None

    def poll(self, *, max_bytes: int = READ_CHUNK, now: float | None = None, final: bool = False) -> list[Line]:
        """New complete lines; with `now`, also a partial last line that has settled; with `final`, any."""
        self.behind = False
        if self._expect is not None:
            self._verify(self._expect)
        lines = self._poll_rotated(max_bytes, now, final)
        if self.behind:
            return lines  # the renamed file's lines first, in order
        due = final or (self.pending() and self._settled(now))
        f = open_if_changed(self.path, inode=self.inode, offset=self.offset if due else self.read_to)
        if f is None:
            return lines
        with f:
            st = os.fstat(f.fileno())
            if self.inode is None:
                self.inode = st.st_ino
            elif st.st_ino != self.inode:
                lines += self._hold_renamed(max_bytes, now)
                self._restart(st.st_ino)
                lines += self._poll_rotated(max_bytes, now, final)
                if self.behind:
                    return lines
            if st.st_size < self.read_to:
                self._restart(st.st_ino)
            return lines + self._read(f, max_bytes, final=final, now=now)

    def _settled(self, now: float | None) -> bool:
        return now is not None and self._grew_at is not None and now - self._grew_at >= self.settle_s

    def _hold_renamed(self, max_bytes: int, now: float | None) -> list[Line]:
        """Keep the file just renamed away open (found by its inode), taking over the position in it; the lines
        left in one held before (renamed twice in a row) are read to its end first."""
        assert self.inode is not None
        out: list[Line] = []
        if self.rotated is not None:
            out = self.rotated.drain(max_bytes)
            self._release()
        old = _find_by_inode(self.path, self.inode)
        if old is None:
            return out
        try:
            f = open(old, "rb")  # noqa: SIM115 - held open while its writer may write (closed in close())
        except OSError:
            return out
        if os.fstat(f.fileno()).st_ino != self.inode:
            f.close()
            return out
        held = Renamed(old, file=f, offset=self.offset, generation=self.generation, inode=self.inode,
                       settle_s=self.settle_s)  # fmt: skip
        held.read_to, held._partial_sent = self.read_to, self._partial_sent
        held._grew_at = now if now is not None else self._grew_at
        self.rotated = held
        return out

    def _poll_rotated(self, max_bytes: int, now: float | None, final: bool) -> list[Line]:
        """The renamed file's new lines; all that is left in it, and closed, once its writer is done."""
        held = self.rotated
        if held is None:
            return []
        lines = held.poll(max_bytes=max_bytes, now=now, final=final)
        self.behind = held.behind
        if not self.behind and (final or now is None or self._writer_gone(held, now)):
            lines += held.drain(max_bytes)
            self.behind = held.behind
            if not self.behind:
                self._release()
        return lines

    def _writer_gone(self, held: Renamed, now: float) -> bool:
        """Quiet for `rotate_wait_s` and held open for writing by no process (asked again after each wait)."""
        quiet = held._grew_at if held._grew_at is not None else now
        if now - max(quiet, held.asked_at or quiet) < self.rotate_wait_s:
            return False
        st = os.fstat(held.file.fileno())
        if self.writing(st.st_dev, st.st_ino):
            held.asked_at = now
            return False
        return True

    def _verify(self, expect: str) -> None:
        """Check the saved position against the file it names: one truncated and grown past the offset again, or
        replaced (a relaunch), while the agent was down is read from its start, with the next generation."""
        self._expect = None
        if self.inode is None or self.offset == 0 or not expect:
            return
        where = self.path if _inode_of(self.path) == self.inode else _find_by_inode(self.path, self.inode)
        if where is None:
            return  # gone: the usual rules (a rename, a new file) apply
        try:
            with open(where, "rb") as f:
                if os.fstat(f.fileno()).st_ino != self.inode:
                    return
                got = fingerprint_of(f, self.offset)
        except OSError:
            return
        if got is None or got == expect:
            return  # the same file (or shorter than the offset: a truncation, seen as usual)
        log.warning("%s is not the file read up to byte %d before the agent stopped (truncated or replaced "
                    "meanwhile): reading it again from its start", where, self.offset)  # fmt: skip
        self._restart(_inode_of(self.path))

    def _restart(self, inode: int | None) -> None:
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


class Renamed(LogTail):
    """A renamed log kept open through its descriptor while its writer may still write to it."""

    def __init__(self, path: Path, *, file: BinaryIO, offset: int, generation: int, inode: int,
                 settle_s: float) -> None:  # fmt: skip
        super().__init__(path, offset=offset, generation=generation, inode=inode, settle_s=settle_s)
        self.file = file
        self.asked_at: float | None = None  # when its writers were last looked for

    @property
    def resume(self) -> tuple[int, int, int | None]:
        return self.offset, self.generation, self.inode

    def poll(self, *, max_bytes: int = READ_CHUNK, now: float | None = None, final: bool = False) -> list[Line]:
        self.behind = False
        due = final or (self.pending() and self._settled(now))
        size = os.fstat(self.file.fileno()).st_size
        if size < self.read_to or size == (self.offset if due else self.read_to):
            return []  # nothing new (or truncated after the rename: nothing of ours left in it)
        return self._read(self.file, max_bytes, final=final, now=now)

    def drain(self, max_bytes: int) -> list[Line]:
        """The rest of it: its writer is done, so a last line without its terminator is complete."""
        self.behind = False
        if os.fstat(self.file.fileno()).st_size < self.offset:
            return []
        return self._read(self.file, max_bytes, final=True, drain=True)


def _inode_of(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


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

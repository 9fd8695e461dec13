"""A local append-only spool for events that could not reach Redis, replayed in order later.

Two files in `directory`: `spool.jsonl` (one encoded event per line, appended and fsynced) and
`spool.pos` (the byte offset of the first event not yet delivered). Delivery advances the
position; once everything is delivered both files are reset. A crash between delivering and
saving the position resends a few events, which the store drops by their ids.

Bounded: an append writes only the events that fit under `max_bytes` (the oldest, in order) and
says how many; the rest stay in the publisher's memory. A disk that refuses the write (full, read-only)
raises SpoolUnwritable with the file cut back to its last whole line, so nothing half-written is ever
replayed; a position that cannot be saved stays in memory (a crash then resends a few delivered
events, which the store drops by their ids). The agent then stops reading
logs (the logs themselves keep the lines, and offsets are not advanced), and counts the sampled
events (GPU, process health) it had to drop; the next heartbeat reports them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from trainwarden.agent.config import SPOOL_MAX_MB
from trainwarden.agent.errors import SpoolUnwritable
from trainwarden.agent.state import write_atomic
from trainwarden.events.codec import decode, encode_full
from trainwarden.events.envelope import Event
from trainwarden.events.errors import DecodeError

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = int(SPOOL_MAX_MB * 2**20)


class Spool:
    def __init__(self, directory: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.data_path = self.directory / "spool.jsonl"
        self.pos_path = self.directory / "spool.pos"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.position_unsaved = False  # the position file is behind `position` (a full disk refused it)
        self.position = self._load_position()
        self.size = self._repair()
        if self.position > self.size:  # a crash between emptying the file and saving position 0
            self._reset()

    def __len__(self) -> int:
        """Bytes waiting to be delivered."""
        return max(0, self.size - self.position)

    @property
    def empty(self) -> bool:
        return self.size <= self.position

    def append(self, events: Sequence[Event]) -> int:
        """Write the longest prefix of `events` that fits under the limit, durably; returns its length."""
        blobs: list[bytes] = []
        room = self.max_bytes - self.size
        for e in events:
            blob = encode_full(e) + b"\n"
            if len(blob) > room:
                break
            blobs.append(blob)
            room -= len(blob)
        if not blobs:
            return 0
        if self.position_unsaved and not self._save_position():
            # a stale saved position ahead of events appended now would make a restart skip them
            raise SpoolUnwritable(f"cannot write the spool position {self.pos_path} (the disk refused it)")
        kept = 0  # events whole on disk; a disk that fills mid-way keeps those (the oldest) and says so
        try:
            with open(self.data_path, "ab") as f:
                for chunk in _chunks(blobs):
                    f.write(b"".join(chunk))
                    f.flush()
                    kept += len(chunk)
                    self.size += sum(map(len, chunk))
                os.fsync(f.fileno())
        except OSError as exc:
            self._cut_back()
            raise SpoolUnwritable(f"cannot write the spool {self.data_path}: {exc}", kept=kept) from exc
        return kept

    def _cut_back(self) -> None:
        """After a failed write: drop the torn chunk and make the whole ones durable (neither needs free space)."""
        try:
            os.truncate(self.data_path, self.size)
            with open(self.data_path, "rb") as f:
                os.fsync(f.fileno())
        except OSError as exc:  # the next start drops a torn last line (_repair)
            log.warning("spool: could not cut %s back to %d bytes: %s", self.data_path, self.size, exc)

    def peek(self, limit: int) -> tuple[list[Event], int]:
        """Up to `limit` oldest undelivered events and the position just past them."""
        events: list[Event] = []
        pos = self.position
        with open(self.data_path, "rb") as f:
            f.seek(pos)
            for raw in f:
                if not raw.endswith(b"\n"):
                    break
                pos += len(raw)
                try:
                    events.append(decode(raw))
                except DecodeError as exc:
                    log.warning("spool: skipping an unreadable line at byte %d: %s", pos - len(raw), exc)
                if len(events) >= limit:
                    break
        return events, pos

    def commit(self, position: int) -> None:
        """Everything before `position` was delivered."""
        self.position = position
        if self.position >= self.size:
            self._reset()
        else:
            self._save_position()

    def _reset(self) -> None:
        with open(self.data_path, "wb"):
            pass
        self.position = self.size = 0
        self._save_position()

    def _save_position(self) -> bool:
        try:
            write_atomic(self.pos_path, str(self.position).encode())
        except OSError as exc:  # kept in memory; see the module docstring
            log.warning("spool: position %d not saved to %s: %s", self.position, self.pos_path, exc)
            self.position_unsaved = True
            return False
        self.position_unsaved = False
        return True

    def _load_position(self) -> int:
        try:
            return int(self.pos_path.read_text().strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def _repair(self) -> int:
        """Drop a torn last line (a crash in the middle of a write); returns the file size."""
        if not self.data_path.exists():
            self.data_path.touch()
            return 0
        size = self.data_path.stat().st_size
        if size == 0:
            return 0
        with open(self.data_path, "rb+") as f:
            f.seek(max(0, size - 1))
            if f.read(1) == b"\n":
                return size
            data_end = _last_newline_end(f, size)
            f.truncate(data_end)
            log.warning("spool: dropped a torn last line (%d bytes) left by a crash", size - data_end)
            return data_end


CHUNK_BYTES = 16384  # small: on a nearly full disk, the more whole chunks land


def _chunks(blobs: list[bytes]) -> Iterator[list[bytes]]:
    """Pure: consecutive runs of whole lines of about CHUNK_BYTES each (one write each)."""
    chunk: list[bytes] = []
    size = 0
    for blob in blobs:
        chunk.append(blob)
        size += len(blob)
        if size >= CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _last_newline_end(f: BinaryIO, size: int) -> int:
    step = 65536
    end = size
    while end > 0:
        start = max(0, end - step)
        f.seek(start)
        chunk = f.read(end - start)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        end = start
    return 0

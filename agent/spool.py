"""A local append-only spool for events that could not reach Redis, replayed in order later.

Two files in `directory`: `spool.jsonl` (one encoded event per line, appended and fsynced) and
`spool.pos` (the byte offset of the first event not yet delivered). Delivery advances the
position; once everything is delivered both files are reset. A crash between delivering and
saving the position resends a few events, which the store drops by their ids.

Bounded: an append writes only the events that fit under `max_bytes` (the oldest, in order) and
says how many; the rest stay in the publisher's memory. The agent then stops reading
logs (the logs themselves keep the lines, and offsets are not advanced), and counts the sampled
events (GPU, process health) it had to drop; the next heartbeat reports them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from trainwarden.agent.config import SPOOL_MAX_MB
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
        if blobs:
            data = b"".join(blobs)
            with open(self.data_path, "ab") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            self.size += len(data)
        return len(blobs)

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
            _write_atomic(self.pos_path, str(self.position).encode())

    def _reset(self) -> None:
        with open(self.data_path, "wb"):
            pass
        _write_atomic(self.pos_path, b"0")
        self.position = self.size = 0

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


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)

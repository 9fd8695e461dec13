"""Batching publisher: buffers events and appends them with one pipelined round trip per flush.

With a spool, nothing is lost while Redis is down: a failed flush moves the buffer to the spool
on disk, and the next flush replays the spool, oldest first, before anything newer. Retrying and
replaying are safe because appends are idempotent per (producer, seq).

A spool the disk refuses (full, read-only) is a full spool: the events wait in memory, the agent
pauses reading its logs (which keep the lines) and saves no offsets past them; the write is tried
again every SPOOL_RETRY_S, and the failures are counted for the heartbeat.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from trainwarden.agent.errors import SpoolUnwritable
from trainwarden.agent.spool import Spool
from trainwarden.events.envelope import Event
from trainwarden.events.errors import StoreUnavailable
from trainwarden.events.heartbeat import NOT_AN_ERROR
from trainwarden.events.store import EventStore

log = logging.getLogger(__name__)

DEFAULT_MAX_BATCH = 2000
RETRY_START_S = 0.1
RETRY_MAX_S = 2.0
SPOOL_RETRY_S = 1.0  # a disk that refused the spool is tried again after this long


class Publisher:
    def __init__(self, store: EventStore, *, spool: Spool | None = None, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self.store = store
        self.spool = spool
        self.max_batch = max_batch
        self.buffer: list[Event] = []
        self.appended = 0
        self.duplicates = 0
        self.spool_full = False
        self.spool_error: str | None = None  # the last write the disk refused (kept for the heartbeat)
        self.spool_write_failures = 0
        self._spool_retry_at = 0.0
        self.outage_since: float | None = None  # monotonic time Redis was first found unreachable
        self._retry_at = 0.0
        self._retry_s = RETRY_START_S

    @property
    def durable(self) -> bool:
        """Everything published so far is in Redis or in the spool (safe to save read offsets)."""
        return not self.buffer

    def publish(self, events: Iterable[Event]) -> None:
        self.buffer.extend(events)

    def flush(self) -> int:
        """Send the spool's backlog, then the buffer; returns the number of events sent.

        With a spool, while Redis is unreachable, Redis is tried again with a growing pause (up to
        RETRY_MAX_S) and in between the buffer goes straight to the spool, so the caller keeps its
        pace. Without one, every flush tries Redis.
        Raises StoreUnavailable when an attempt fails: the buffer is then in the spool (or,
        without a spool or with a full one, still in memory, and `durable` is False).
        """
        if self.spool is not None and self.outage_since is not None and time.monotonic() < self._retry_at:
            self._spool_buffer()
            return 0
        sent = 0
        try:
            if self.spool is not None and not self.spool.empty:
                sent += self._drain_spool()
            while self.buffer:
                batch = self.buffer[: self.max_batch]
                self._append(batch)
                del self.buffer[: len(batch)]
                sent += len(batch)
        except StoreUnavailable:
            self._spool_buffer()
            now = time.monotonic()
            if self.outage_since is None:
                self.outage_since = now
            self._retry_at = now + self._retry_s
            self._retry_s = min(self._retry_s * 2, RETRY_MAX_S)
            raise
        self.outage_since = None
        self._retry_s = RETRY_START_S
        return sent

    def _append(self, batch: list[Event]) -> None:
        stored = self.store.append_count(batch)
        self.appended += stored
        self.duplicates += len(batch) - stored

    def _drain_spool(self) -> int:
        assert self.spool is not None
        sent = 0
        while not self.spool.empty:
            events, position = self.spool.peek(self.max_batch)
            if events:
                self._append(events)
                sent += len(events)
            self.spool.commit(position)
        if sent:
            log.warning("delivered %d spooled events", sent, extra=NOT_AN_ERROR)
        self.spool_full = False
        self.outage_since = None
        self._retry_at = 0.0
        self._retry_s = RETRY_START_S
        return sent

    def _spool_buffer(self) -> None:
        if self.spool is None or not self.buffer:
            return
        now = time.monotonic()
        if now < self._spool_retry_at:
            return
        try:
            written = self.spool.append(self.buffer)
        except SpoolUnwritable as exc:
            written = exc.kept
            self.spool_write_failures += 1
            self._spool_retry_at = now + SPOOL_RETRY_S
            if self.spool_error is None or not self.spool_full:
                log.error("%s: %d events wait in memory and log reading pauses (the logs keep the lines) until "
                          "Redis or the disk takes them", exc, len(self.buffer) - written)  # fmt: skip
            self.spool_error = str(exc)
        else:
            if self.buffer[written:] and not self.spool_full:
                log.error(
                    "spool %s is full (%d bytes): %d events wait in memory and log reading pauses until Redis is "
                    "back; raise agent.spool_max_mb to spool more",
                    self.spool.data_path, self.spool.max_bytes, len(self.buffer) - written,
                )  # fmt: skip
        del self.buffer[:written]
        self.spool_full = bool(self.buffer)

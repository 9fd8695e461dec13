"""Batching publisher: buffers events and appends them with one pipelined round trip per flush."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from events.envelope import Event
from events.errors import StoreUnavailable
from events.store import EventStore

log = logging.getLogger(__name__)

DEFAULT_MAX_BATCH = 2000


class Publisher:
    """Nothing is dropped: a failed flush keeps the buffer and the next flush retries it.

    Retrying is safe because appends are idempotent per (producer, seq).
    """

    def __init__(self, store: EventStore, *, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self.store = store
        self.max_batch = max_batch
        self.buffer: list[Event] = []
        self.appended = 0
        self.duplicates = 0

    def publish(self, events: Iterable[Event]) -> None:
        self.buffer.extend(events)

    def flush(self) -> int:
        """Append everything buffered; returns the number of events sent. Raises StoreUnavailable
        (buffer kept) when Redis cannot be reached."""
        sent = 0
        while self.buffer:
            batch = self.buffer[: self.max_batch]
            try:
                results = self.store.append(batch)
            except StoreUnavailable:
                log.warning("Redis unreachable; keeping %d events buffered for retry", len(self.buffer))
                raise
            assert results is not None
            stored = sum(1 for sid in results if sid is not None)
            self.appended += stored
            self.duplicates += len(batch) - stored
            del self.buffer[: len(batch)]
            sent += len(batch)
        return sent

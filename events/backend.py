"""What a store backend must do: the event log and the feed's consumer groups as Protocols, leases as LeaseBase.

Stated once so that a second backend (events/memory.py) can stand in for Redis, and so that one
contract suite (tests/contract/) holds every backend to the same semantics: appends idempotent by
(producer, seq), one ordered log per run, one feed entry per batch that stored something, consumer
groups with pending, ack and claim, leases with a TTL and a fencing token. The Protocols hold only
what callers use without Redis in hand; pipelines (`pipeline=`, `shared`, `flush`,
`Lease.transaction`) stay Redis-only, because they exist to group Redis writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from trainwarden.events.envelope import Event
from trainwarden.events.feed import GroupReader
from trainwarden.events.lease import Lease, LeaseBase
from trainwarden.events.store import DeadLetter, EventStore, Malformed

StreamEntry = tuple[str, dict[bytes, bytes]]  # a stream entry as the feed's consumers see it: its id and fields
RawEntry = tuple[bytes, dict[bytes, bytes]]  # a log entry as stored (events/redis_types.py: Entry)


class EventLog(Protocol):
    """Appends and reads runs' events (events/store.py: EventStore)."""

    def append(self, events: Sequence[Event]) -> list[str | None]:
        """The stream id of each event in input order; None where its (producer, seq) was already stored."""
        ...

    def append_count(self, events: Sequence[Event]) -> int: ...

    def append_one(self, event: Event) -> str | None: ...

    def read(self, run: str, *, after: str | None = None, count: int = 1000) -> list[tuple[str, Event | Malformed]]: ...

    def iter_run(
        self, run: str, *, after: str | None = None, start: str = "-", until: str = "+", page: int = 10_000
    ) -> Iterator[tuple[str, Event | Malformed]]: ...

    def get(self, run: str, sid: str) -> Event | Malformed | None: ...

    def length(self, run: str) -> int: ...

    def runs(self) -> list[tuple[str, float]]: ...

    def dead_letter(self, *, source: str, sid: str, reason: str, fields: dict[bytes, bytes]) -> None: ...

    def dead_letters(self, *, count: int = 100) -> list[DeadLetter]: ...


class RecentLog(EventLog, Protocol):
    """An event log that also reads runs newest first: what the bot's logic needs (/status's GPU samples, a
    guarded stop's outcome), so that it runs on any backend."""

    def newest_pages(self, ends: Sequence[tuple[str, str]], *, count: int, what: str) -> list[list[RawEntry]]:
        """For each (run, end): up to `count` of the run's entries as stored, newest first, from `end` down
        (`+`, an id, or `(id` to exclude it); one round trip on Redis whatever their number. `what` names the
        read in the error a failure raises."""
        ...


class FeedReader(Protocol):
    """One consumer in one consumer group of the feed (events/feed.py: GroupReader)."""

    def ensure_group(self) -> None: ...

    def read(self, *, count: int = 500, block_ms: int | None = None) -> list[StreamEntry]: ...

    def read_own_pending(self, *, count: int = 500) -> list[StreamEntry]: ...

    def claim_stale(self, *, min_idle_ms: int, count: int = 500) -> list[StreamEntry]: ...

    def ack(self, ids: Sequence[str]) -> None: ...

    def pending(self) -> int: ...


class Backend(Protocol):
    """A store backend: the event log, readers of its feed, and leases."""

    @property
    def log(self) -> RecentLog: ...

    def feed_reader(self, group: str, consumer: str) -> FeedReader: ...

    def lease(self, name: str, *, ttl_s: float, host: str | None = None) -> LeaseBase: ...


@dataclass(frozen=True, slots=True)
class RedisBackend:
    """The production backend: one Redis or a Redis Cluster, through the store's own client."""

    store: EventStore

    # Typed as the Protocols, so that mypy checks EventStore and GroupReader meet them.
    @property
    def log(self) -> RecentLog:
        return self.store

    def feed_reader(self, group: str, consumer: str) -> FeedReader:
        return GroupReader(self.store.redis, stream=self.store.keys.feed(), group=group, consumer=consumer)

    def lease(self, name: str, *, ttl_s: float, host: str | None = None) -> Lease:
        return Lease(self.store.redis, self.store.keys, name, ttl_s=ttl_s, host=host)

"""The store in process memory: the event log, the feed's consumer groups and leases, without Redis.

A real backend (events/backend.py) for fast tests of worker and bot logic and for a single-process
demo, held to the same contract suite as Redis and Redis Cluster (tests/contract/): appends are
idempotent by the producer's high-water mark, each run is one ordered stream with Redis-shaped ids
(`<ms>-<n>`), each batch that stored something adds one feed entry with the fields the Redis script
writes (so `parse_feed_entry` reads both), consumer groups keep a pending list with ack and claim
after idle, and a lease has a TTL and a fencing token. One lock makes every operation atomic, as
the Lua script and MULTI/EXEC make them on Redis. Nothing survives the process: not for production.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from trainwarden.events.backend import FeedReader, RawEntry, RecentLog
from trainwarden.events.codec import FIELD_BYTES, encode
from trainwarden.events.envelope import Event
from trainwarden.events.memory_lease import LeaseTable, MemoryLease
from trainwarden.events.sids import MAX_PART, sid_key
from trainwarden.events.store import DeadLetter, Malformed, decode_entries
from trainwarden.events.urgency import urgency_marks

SidKey = tuple[int, int]
Fields = dict[bytes, bytes]
LOWEST: SidKey = (0, 0)
HIGHEST: SidKey = (MAX_PART, MAX_PART)

__all__ = ["MemoryBackend", "MemoryGroupReader", "MemoryLease", "MemoryStore"]


def range_start(sid: str) -> SidKey:
    """XRANGE's start: `-`, an id (a bare `<ms>` is `<ms>-0`), or `(id` for strictly after it."""
    if sid == "-":
        return LOWEST
    if sid.startswith("("):
        ms, n = sid_key(sid[1:])
        return (ms, n + 1) if n < MAX_PART else (ms + 1, 0)
    return sid_key(sid)


def range_end(sid: str) -> SidKey:
    """XRANGE's end: `+`, an id (a bare `<ms>` is the last id of that millisecond), or `(id`."""
    if sid == "+":
        return HIGHEST
    if sid.startswith("("):
        ms, n = sid_key(sid[1:])
        return (ms, n - 1) if n > 0 else (ms - 1, MAX_PART)
    whole, sep, part = sid.partition("-")
    return (int(whole), int(part) if sep else MAX_PART)


@dataclass
class Stream:
    """An append-only stream with ids like Redis's: wall-clock milliseconds, then a counter."""

    keys: list[SidKey] = field(default_factory=list)
    fields: list[Fields] = field(default_factory=list)

    def add(self, fields: Fields) -> str:
        ms = int(time.time() * 1000)
        last = self.keys[-1] if self.keys else LOWEST
        key = (ms, 0) if ms > last[0] else (last[0], last[1] + 1)
        self.keys.append(key)
        self.fields.append(fields)
        return f"{key[0]}-{key[1]}"

    def range(self, start: SidKey, end: SidKey, count: int | None = None) -> list[tuple[str, Fields]]:
        lo = bisect.bisect_left(self.keys, start)
        hi = bisect.bisect_right(self.keys, end)
        if count is not None:
            hi = min(hi, lo + count)
        return [(f"{ms}-{n}", self.fields[i]) for i, (ms, n) in enumerate(self.keys[lo:hi], start=lo)]

    def after(self, key: SidKey, count: int) -> list[tuple[str, Fields]]:
        return self.range((key[0], key[1] + 1), HIGHEST, count)

    def lookup(self, sid: str) -> Fields | None:
        key = sid_key(sid)
        i = bisect.bisect_left(self.keys, key)
        return self.fields[i] if i < len(self.keys) and self.keys[i] == key else None


@dataclass
class Delivery:
    """A pending entry: who holds it, since when (clock ms), how often it was delivered."""

    consumer: str
    since_ms: float
    count: int = 1


@dataclass
class Group:
    last: SidKey = LOWEST
    pending: dict[SidKey, Delivery] = field(default_factory=dict)


class MemoryStore:
    """The event log (events/backend.py: RecentLog), the feed and its groups, and the leases, in memory."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock  # seconds; leases expire and pending entries grow idle by it
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)  # a blocked feed read wakes on an append
        self.logs: dict[str, Stream] = {}
        self.hwm: dict[str, dict[str, int]] = {}
        self.feed = Stream()
        self.groups: dict[str, Group] = {}
        self.last_ts: dict[str, float] = {}
        self.dead: list[DeadLetter] = []
        self.dead_ids = Stream()
        self.leases = LeaseTable(clock)

    # -- writes ---------------------------------------------------------------------------------

    def append(self, events: Sequence[Event]) -> list[str | None]:
        """Append events in order; one whose (producer, seq) is at or below the producer's mark is skipped."""
        runs: dict[str, list[int]] = {}
        for i, e in enumerate(events):
            runs.setdefault(e.run, []).append(i)
        out: list[str | None] = [None] * len(events)
        with self.changed:
            for run, positions in runs.items():
                batch = [events[i] for i in positions]
                for i, sid in zip(positions, self._append_run(run, batch), strict=True):
                    out[i] = sid
            self.changed.notify_all()
        return out

    def _append_run(self, run: str, batch: Sequence[Event]) -> list[str | None]:
        log, marks = self.logs.setdefault(run, Stream()), self.hwm.setdefault(run, {})
        urgent_marks = urgency_marks(batch)
        sids: list[str | None] = []
        types: set[str] = set()
        urgent = False
        for i, e in enumerate(batch):
            if e.producer in marks and e.seq <= marks[e.producer]:
                sids.append(None)
                continue
            marks[e.producer] = e.seq
            sids.append(log.add({FIELD_BYTES: encode(e)}))
            types.add(e.type)
            urgent = urgent or urgent_marks[i : i + 1] == "1"
        stored = [sid for sid in sids if sid is not None]
        if stored:
            entry = {b"r": run.encode(), b"f": stored[0].encode(), b"l": stored[-1].encode(),
                     b"t": ",".join(sorted(types)).encode()}  # fmt: skip
            if urgent:
                entry[b"u"] = b"1"
            self.feed.add(entry)
            self.last_ts[run] = max(e.ts for e in batch)
        return sids

    def append_count(self, events: Sequence[Event]) -> int:
        return sum(sid is not None for sid in self.append(events))

    def append_one(self, event: Event) -> str | None:
        return self.append([event])[0]

    def dead_letter(self, *, source: str, sid: str, reason: str, fields: dict[bytes, bytes]) -> None:
        raw = repr({k.decode("latin-1"): v.decode("utf-8", "replace") for k, v in fields.items()})
        with self.lock:
            dead_id = self.dead_ids.add({})
            self.dead.append(DeadLetter(id=dead_id, source=source, sid=sid, reason=reason, raw=raw))

    # -- reads ----------------------------------------------------------------------------------

    def _range(self, run: str, start: str, until: str, count: int | None) -> list[tuple[bytes, Fields]]:
        with self.lock:
            log = self.logs.get(run)
            entries = log.range(range_start(start), range_end(until), count) if log is not None else []
        return [(sid.encode(), fields) for sid, fields in entries]

    def read(self, run: str, *, after: str | None = None, count: int = 1000) -> list[tuple[str, Event | Malformed]]:
        return decode_entries(self._range(run, "-" if after is None else f"({after}", "+", count), run)

    def iter_run(
        self, run: str, *, after: str | None = None, start: str = "-", until: str = "+", page: int = 10_000
    ) -> Iterator[tuple[str, Event | Malformed]]:
        if after is not None:
            start = f"({after}"
        while entries := self._range(run, start, until, page):
            yield from decode_entries(entries, run)
            if len(entries) < page:
                return
            start = f"({entries[-1][0].decode()}"

    def get(self, run: str, sid: str) -> Event | Malformed | None:
        found = self._range(run, sid, sid, 1)
        return decode_entries(found, run)[0][1] if found else None

    def newest_pages(self, ends: Sequence[tuple[str, str]], *, count: int, what: str) -> list[list[RawEntry]]:
        with self.lock:
            pages = [self._newest(run, end, count) for run, end in ends]
        return [[(sid.encode(), fields) for sid, fields in page] for page in pages]

    def _newest(self, run: str, end: str, count: int) -> list[tuple[str, Fields]]:
        log = self.logs.get(run)
        return [] if log is None else log.range(LOWEST, range_end(end))[: -count - 1 : -1]

    def length(self, run: str) -> int:
        with self.lock:
            return len(self.logs[run].keys) if run in self.logs else 0

    def runs(self) -> list[tuple[str, float]]:
        """Known runs with the time of their last appended batch, most recent first (ZREVRANGE's order)."""
        with self.lock:
            return sorted(self.last_ts.items(), key=lambda item: (item[1], item[0]), reverse=True)

    def dead_letters(self, *, count: int = 100) -> list[DeadLetter]:
        with self.lock:
            return self.dead[::-1][:count]


class MemoryGroupReader:
    """One consumer in one consumer group of the in-memory feed (events/backend.py: FeedReader)."""

    def __init__(self, store: MemoryStore, *, group: str, consumer: str) -> None:
        self.store = store
        self.group = group
        self.consumer = consumer

    def _group(self) -> Group:
        """The group, created at the start of the feed where it is missing (as GroupReader recreates it)."""
        return self.store.groups.setdefault(self.group, Group())

    def ensure_group(self) -> None:
        with self.store.lock:
            self._group()

    def _deliver(self, group: Group, entries: list[tuple[str, Fields]]) -> list[tuple[str, Fields]]:
        now = self.store.clock() * 1000
        for sid, _ in entries:
            key = sid_key(sid)
            before = group.pending.get(key)
            group.pending[key] = Delivery(self.consumer, now, before.count + 1 if before else 1)
        return entries

    def read(self, *, count: int = 500, block_ms: int | None = None) -> list[tuple[str, Fields]]:
        """New entries for this consumer; blocks up to `block_ms` (0: for ever, as XREADGROUP) when there are none."""
        deadline = None if block_ms is None else self.store.clock() + block_ms / 1000
        with self.store.changed:
            group = self._group()
            while not (entries := self.store.feed.after(group.last, count)):
                if deadline is None:
                    return []
                left = deadline - self.store.clock()
                if block_ms != 0 and left <= 0:
                    return []
                self.store.changed.wait(None if block_ms == 0 else left)
            group.last = sid_key(entries[-1][0])
            return self._deliver(group, entries)

    def read_own_pending(self, *, count: int = 500) -> list[tuple[str, Fields]]:
        with self.store.lock:
            group = self._group()
            mine = sorted(key for key, d in group.pending.items() if d.consumer == self.consumer)[:count]
            entries = [(f"{ms}-{n}", self.store.feed.lookup(f"{ms}-{n}") or {}) for ms, n in mine]
            return self._deliver(group, entries)

    def claim_stale(self, *, min_idle_ms: int, count: int = 500) -> list[tuple[str, Fields]]:
        """Take over entries pending longer than `min_idle_ms` with any consumer, oldest first (XAUTOCLAIM)."""
        with self.store.lock:
            group = self._group()
            now = self.store.clock() * 1000
            stale = sorted(key for key, d in group.pending.items() if now - d.since_ms >= min_idle_ms)[:count]
            entries = [(f"{ms}-{n}", self.store.feed.lookup(f"{ms}-{n}")) for ms, n in stale]
            for sid, fields in entries:
                if fields is None:  # gone from the feed: dropped from the pending list, as XAUTOCLAIM does
                    del group.pending[sid_key(sid)]
            return self._deliver(group, [(sid, fields) for sid, fields in entries if fields is not None])

    def ack(self, ids: Sequence[str]) -> None:
        with self.store.lock:
            group = self._group()
            for sid in ids:
                group.pending.pop(sid_key(sid), None)

    def pending(self) -> int:
        with self.store.lock:
            return len(self._group().pending)


@dataclass(frozen=True, slots=True)
class MemoryBackend:
    """The in-memory backend (events/backend.py: Backend) over one MemoryStore."""

    store: MemoryStore = field(default_factory=MemoryStore)

    @property
    def log(self) -> RecentLog:
        return self.store

    def feed_reader(self, group: str, consumer: str) -> FeedReader:
        return MemoryGroupReader(self.store, group=group, consumer=consumer)

    def lease(self, name: str, *, ttl_s: float, host: str | None = None) -> MemoryLease:
        return MemoryLease(self.store.leases, name, ttl_s=ttl_s, host=host)

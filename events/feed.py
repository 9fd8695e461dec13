"""Consuming the feed through Redis consumer groups: at-least-once delivery with recovery.

Each append batch adds one feed entry `{r: run, f: first id, l: last id, t: types}`, and `u: 1`
when the batch stored an event that can only mean trouble (events/urgency.py: the fast lane). A consumer
reads entries with XREADGROUP, acknowledges them once their work is done, and anything a dead
consumer left pending is taken over with XAUTOCLAIM after `min_idle_ms`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import redis
from redis.client import Pipeline
from trainwarden.events.envelope import RUN_NAME_RE
from trainwarden.events.errors import DecodeError
from trainwarden.events.redis_types import Client, pending_reads, stream_reads
from trainwarden.events.sids import sid_key
from trainwarden.events.store import redis_errors

log = logging.getLogger(__name__)

DISPATCH_GROUP = "dispatch"
NOTIFY_GROUP = "notify"
ALL_GROUPS = (DISPATCH_GROUP, NOTIFY_GROUP)
RECLAIM_IDLE_S = 30.0  # seconds an entry may stay unacknowledged before another consumer (dispatcher, bot) claims it


@dataclass(frozen=True, slots=True)
class FeedEntry:
    fid: str
    run: str
    first: str
    last: str
    types: frozenset[str]
    urgent: bool = False  # `u=1`: the run's job takes the workers' fast lane


def parse_feed_entry(fid: str, fields: dict[bytes, bytes]) -> FeedEntry:
    try:
        entry = FeedEntry(
            fid=fid,
            run=fields[b"r"].decode(),
            first=fields[b"f"].decode(),
            last=fields[b"l"].decode(),
            types=frozenset(fields[b"t"].decode().split(",")),
            urgent=fields.get(b"u") == b"1",
        )
    except (KeyError, UnicodeDecodeError) as exc:
        raise DecodeError(f"feed entry lacks or garbles field {exc}", event_id=fid) from None
    if not RUN_NAME_RE.match(entry.run):  # it names keys and jobs: one that cannot be a run is retried for ever
        raise DecodeError(f"feed entry names an invalid run {entry.run[:100]!r}", event_id=fid)
    return entry


class GroupReader:
    """One consumer in one consumer group of one stream."""

    def __init__(self, client: Client, *, stream: str, group: str, consumer: str) -> None:
        self.redis = client
        self.stream = stream
        self.group = group
        self.consumer = consumer

    def ensure_group(self) -> None:
        """Create the group at the start of the stream, so a late consumer still sees everything."""
        with redis_errors("create the consumer group", group=self.group):
            try:
                self.redis.xgroup_create(self.stream, self.group, id="0", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    def read(self, *, count: int = 500, block_ms: int | None = None) -> list[tuple[str, dict[bytes, bytes]]]:
        """New entries for this consumer; blocks up to `block_ms` when there are none."""
        with redis_errors("read the feed", group=self.group):
            try:
                reply = stream_reads(
                    self.redis.xreadgroup(self.group, self.consumer, {self.stream: ">"}, count=count, block=block_ms)
                )
            except redis.ResponseError as exc:
                self._recreate(exc)
                return []
        if not reply:
            return []
        return [(sid.decode(), fields) for sid, fields in reply[0][1]]

    def read_own_pending(self, *, count: int = 500) -> list[tuple[str, dict[bytes, bytes]]]:
        """Entries this consumer read earlier but has not acknowledged (after a restart or a failure), in order."""
        with redis_errors("read the feed", group=self.group):
            try:
                reply = pending_reads(self.redis.xreadgroup(self.group, self.consumer, {self.stream: "0"}, count=count))
            except redis.ResponseError as exc:
                self._recreate(exc)
                return []
        if not reply:
            return []
        return [(sid.decode(), fields or {}) for sid, fields in reply[0][1]]  # trimmed: {} (acked as garbage)

    def claim_stale(self, *, min_idle_ms: int, count: int = 500) -> list[tuple[str, dict[bytes, bytes]]]:
        """Take over entries another consumer read but did not acknowledge within `min_idle_ms`."""
        out: list[tuple[str, dict[bytes, bytes]]] = []
        start = "0-0"
        with redis_errors("claim stale feed entries", group=self.group):
            while True:
                try:
                    reply = self.redis.xautoclaim(
                        self.stream, self.group, self.consumer, min_idle_ms, start_id=start, count=count
                    )
                except redis.ResponseError as exc:
                    self._recreate(exc)
                    return out
                start = reply[0].decode() if isinstance(reply[0], bytes) else reply[0]
                out.extend((sid.decode(), fields) for sid, fields in reply[1] if fields is not None)
                if start == "0-0" or len(out) >= count:
                    return out

    def _recreate(self, exc: redis.ResponseError) -> None:
        """The group is gone (Redis restarted without its data, or someone deleted it): create it again."""
        if not str(exc).startswith("NOGROUP"):
            raise exc
        log.warning("consumer group %s of %s is gone (Redis restarted without its data?); creating it again",
                    self.group, self.stream)  # fmt: skip
        self.ensure_group()

    def ack(self, ids: Sequence[str], *, pipeline: Pipeline | None = None) -> None:
        if not ids:
            return
        target = pipeline if pipeline is not None else self.redis
        with redis_errors("acknowledge feed entries", group=self.group):
            target.xack(self.stream, self.group, *ids)

    def pending(self) -> int:
        with redis_errors("count pending feed entries", group=self.group):
            return int(self.redis.xpending(self.stream, self.group)["pending"])


def ack_feed(client: Client | Pipeline, *, stream: str, group: str, ids: Sequence[str]) -> None:
    """Acknowledge on behalf of a consumer that is gone (a worker acks what the dispatcher read)."""
    if ids:
        with redis_errors("acknowledge feed entries", group=group):
            client.xack(stream, group, *ids)


def trim_feed(client: Client, *, stream: str, groups: Sequence[str] = ALL_GROUPS) -> int:
    """Drop feed entries every group has consumed and acknowledged; returns how many were removed.

    The feed is an index into the run logs, not the source of truth: trimming it loses nothing.
    Each group keeps everything from its oldest pending entry (or its read position) on.
    """
    with redis_errors("trim the feed"):
        try:
            infos = {info["name"].decode(): info for info in client.xinfo_groups(stream)}
        except redis.ResponseError:
            return 0
        if any(g not in infos for g in groups):
            return 0
        floor: str | None = None
        for g in groups:
            summary = client.xpending(stream, g)
            low = summary["min"] if summary["pending"] else infos[g]["last-delivered-id"]
            low = low.decode() if isinstance(low, bytes) else low
            if floor is None or sid_key(low) < sid_key(floor):
                floor = low
        if floor is None or floor == "0-0":
            return 0
        return int(client.xtrim(stream, minid=floor, approximate=False))

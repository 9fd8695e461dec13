"""The notification path as named stages: observe -> select -> dedup -> render -> send.

The notifier reads the feed through its own consumer group (`notify`), so it sees every event the
workers produce without slowing them down, and picks out the few that need a person.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TextIO

from bot.messages import notification_text
from events import types as t
from events.envelope import Event
from events.errors import DecodeError
from events.feed import NOTIFY_GROUP, GroupReader, parse_feed_entry
from events.loop import run_loop
from events.store import EventStore, Malformed

log = logging.getLogger(__name__)

# Feed entries carrying none of these types are acknowledged without reading the run's log.
NOTIFY_INPUT_TYPES = frozenset(
    {t.ANOMALY_OPENED, t.ANOMALY_RESOLVED, t.DECISION, t.STOP_DONE, t.STOP_FAILED, t.RUN_FAILED, t.EVIDENCE_BUILT,
     t.POLICY_REJECTED}
)  # fmt: skip
DEDUP_TTL_S = 30 * 24 * 3600
DEFAULT_RECLAIM_IDLE_MS = 30_000


@dataclass(frozen=True, slots=True)
class Notification:
    key: str  # the event id: deterministic, so a redelivered event maps to the same notification
    run: str
    text: str
    event: Event


class Sink(Protocol):
    def send(self, notification: Notification) -> None: ...


class ConsoleSink:
    """Without a Slack token: the same words, printed."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout

    def send(self, notification: Notification) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(notification.event.ts))
        print(f"[{stamp}] {notification.text}", file=self.stream, flush=True)


class Notifier:
    def __init__(
        self, *, store: EventStore, sink: Sink, consumer: str, reclaim_idle_ms: int = DEFAULT_RECLAIM_IDLE_MS
    ) -> None:
        self.store = store
        self.sink = sink
        self.reclaim_idle_ms = reclaim_idle_ms
        self.reader = GroupReader(store.redis, stream=store.keys.feed(), group=NOTIFY_GROUP, consumer=consumer)
        self.evidence: dict[str, str] = {}  # run -> latest evidence pack path (observed)
        self.sent = 0
        self._next_reclaim = 0.0

    # -- stages -----------------------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        """Remember context later messages refer to."""
        if event.type == t.EVIDENCE_BUILT and event.data.get("path"):
            self.evidence[event.run] = event.data["path"]

    def select(self, event: Event) -> Notification | None:
        text = notification_text(event, evidence_path=self.evidence.get(event.run))
        return None if text is None else Notification(key=event.id, run=event.run, text=text, event=event)

    def is_duplicate(self, notification: Notification) -> bool:
        return bool(self.store.redis.exists(self.store.keys.notified(notification.key)))

    def send(self, notification: Notification) -> None:
        self.sink.send(notification)
        self.store.redis.set(self.store.keys.notified(notification.key), "1", ex=DEDUP_TTL_S)
        self.sent += 1

    def handle(self, event: Event) -> None:
        self.observe(event)
        notification = self.select(event)
        if notification is None or self.is_duplicate(notification):
            return
        self.send(notification)

    # -- loop -------------------------------------------------------------------------------------

    def step(self, *, block_ms: int | None = None) -> int:
        entries: list[tuple[str, dict[bytes, bytes]]] = []
        now = time.monotonic()
        if now >= self._next_reclaim:
            self._next_reclaim = now + self.reclaim_idle_ms / 2000
            entries += self.reader.claim_stale(min_idle_ms=self.reclaim_idle_ms)
        entries += self.reader.read(block_ms=block_ms)
        self._consume(entries)
        return len(entries)

    def _consume(self, entries: Sequence[tuple[str, dict[bytes, bytes]]]) -> None:
        for fid, fields in entries:
            try:
                entry = parse_feed_entry(fid, fields)
            except DecodeError:
                self.reader.ack([fid])  # the dispatcher dead-letters it
                continue
            if entry.types & NOTIFY_INPUT_TYPES:
                for _sid, item in self.store.iter_run(entry.run, start=entry.first, until=entry.last):
                    if not isinstance(item, Malformed):
                        self.handle(item)
            self.reader.ack([fid])

    def run(self, *, burst: bool = False, stop: threading.Event | None = None) -> None:
        self.reader.ensure_group()
        run_loop(lambda block_ms: self.step(block_ms=block_ms), name="notifier", burst=burst, stop=stop)

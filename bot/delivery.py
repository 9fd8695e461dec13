"""Exactly-once posting, keyed by the id of the event that caused the notification.

    status None   -> append `notification.intent` (+ mark the key "intent"), post, then
                     append `notification.sent`  (+ mark the key "sent" with the message's ts)
    status intent -> a previous notifier died between the two: look for the key in the channel
                     (message metadata) and post only if it is not there
    status sent   -> nothing to do

Each event is appended in one MULTI/EXEC with its mark in the run's `notified` hash, so the mark
and the audit record never disagree. Failpoints `notify-after-intent`, `notify-after-post` and
`notify-after-sent` let the kill -9 tests freeze the notifier at each step.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from bot.sink import Message, Sink
from events import types as t
from events.envelope import make_event, time_seq
from events.store import EventStore, redis_errors
from workers.faults import failpoint

INTENT = "intent"
SENT = "sent"


class Delivery:
    def __init__(self, *, store: EventStore, sink: Sink, host: str) -> None:
        self.store = store
        self.sink = sink
        self.host = host
        self.posted = 0  # messages this process posted (not counting reconciled ones)
        self.reconciled = 0  # messages found already posted after a crash

    def status(self, run: str, key: str) -> dict[str, Any] | None:
        with redis_errors("read a notification's status", run=run):
            raw = self.store.redis.hget(self.store.keys.notified(run), key)
        return None if raw is None else json.loads(raw)

    def deliver(
        self, message: Message, *, status: dict[str, Any] | None, after_post: Callable[[str], None] | None = None
    ) -> str:
        """Post `message` once (see the module docstring) given its current `status` (from `status()`;
        None without reading it is right only for events no notifier has tried yet); returns its ts.
        `after_post` (idempotent follow-ups such as updating the parent message) runs before the
        result is recorded."""
        if status is not None and status["state"] == SENT:
            return str(status["ts"])
        ts: str | None = None
        reconciled = False
        if status is not None:
            ts = self.sink.find(
                channel=status["channel"], key=message.key, thread_ts=status.get("thread_ts"), oldest=status["at"]
            )
            reconciled = ts is not None
        else:
            self._record(message, INTENT, {"at": time.time()})
            failpoint("notify-after-intent", self.store.redis, self.store.keys)
        if ts is None:
            ts = self.sink.post(message)
            self.posted += 1
            failpoint("notify-after-post", self.store.redis, self.store.keys)
        else:
            self.reconciled += 1
        if after_post is not None:
            after_post(ts)
        self._record(message, SENT, {"ts": ts, "reconciled": reconciled})
        failpoint("notify-after-sent", self.store.redis, self.store.keys)
        return ts

    def _record(self, message: Message, state: str, extra: dict[str, Any]) -> None:
        data = {"key": message.key, "channel": message.channel, "thread_ts": message.thread_ts,
                "text": message.text, **extra}  # fmt: skip
        event_type = t.NOTIFICATION_INTENT if state == INTENT else t.NOTIFICATION_SENT
        event = make_event(event_type, run=message.run, host=self.host, producer=f"notify/{self.host}",
                           seq=time_seq(), data=data)  # fmt: skip
        with redis_errors("record a notification", run=message.run):
            pipe = self.store.redis.pipeline(transaction=True)
            self.store.append([event], pipeline=pipe)
            pipe.hset(self.store.keys.notified(message.run), message.key, json.dumps({"state": state, **data}))
            pipe.execute()

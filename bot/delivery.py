"""Exactly-once posting, keyed by the id of the event that caused the notification.

    status None   -> append `notification.intent` (+ mark the key "intent"), post, then
                     append `notification.sent`  (+ mark the key "sent" with the message's ts);
                     the result is written with the next intent or by `flush()` (the notifier
                     flushes with its checkpoint, before acknowledging the feed entry), which
                     saves a round trip per message: a crash before it is the "intent" case
    status intent -> a previous notifier died between the two: look for the key in the channel
                     (message metadata) and post only if it is not there
    status sent   -> nothing to do
    status failed -> nothing to do: Slack refused it, then refused it again as plain text

A refusal of one message (Slack's ok=false for anything but the token or channel: a block over a
limit that fitting missed, say) is recorded as `notification.failed` with Slack's error and the
message is posted once more as its text alone, cut to fit (bot/limits.py); if that is refused too
the key is marked failed and the notifier goes on. So one message never holds up the next.
A refusal of the setup (`SlackRejected.setup`) propagates: nothing could be posted.

Each event is appended in one MULTI/EXEC with its mark in the run's `notified` hash (kept by
events/notify_state.py: this module calls no Redis command itself), so the mark
and the audit record never disagree. Only the notifier lease's holder writes them and posts: the
MULTI/EXEC is fenced by its token and the token is checked again right before each post or upload
(events/lease.py), so a holder paused past its lease, whose standby took over, posts nothing more.
Failpoints `notify-after-intent`, `notify-after-post` (here) and `notify-after-sent` (in the
notifier, after the results and its checkpoint are committed) let the kill -9 tests freeze the
notifier at each step.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from trainwarden.bot.errors import SlackRejected
from trainwarden.bot.limits import fallback_text
from trainwarden.bot.sink import Message, Sink
from trainwarden.core.counters import count, gauge
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event, time_seq
from trainwarden.events.faults import failpoint
from trainwarden.events.lease import Lease, Unfenced
from trainwarden.events.notify_state import NotifyStateRepo
from trainwarden.events.payloads import NotificationData
from trainwarden.events.redis_types import Pipeline
from trainwarden.events.store import EventStore

log = logging.getLogger(__name__)

INTENT = "intent"
SENT = "sent"
FAILED = "failed"
FULL, PLAIN = "full", "plain"  # the two attempts at a message Slack refuses


class Delivery:
    def __init__(self, *, store: EventStore, sink: Sink, host: str, fence: Lease | Unfenced | None = None) -> None:
        self.store = store
        self.sink = sink
        self.host = host
        self.fence = fence if fence is not None else Unfenced(store.redis)
        self.marks = NotifyStateRepo(store.redis, store.keys)
        self._results: list[tuple[Event, Message, dict[str, Any]]] = []  # posted, not yet recorded

    def status(self, run: str, key: str) -> dict[str, Any] | None:
        for _event, message, mark in reversed(self._results):  # the latest result for the key
            if message.run == run and message.key == key:
                return mark
        return self.marks.mark(run, key)

    def deliver(
        self, message: Message, *, status: dict[str, Any] | None, after_post: Callable[[str], None] | None = None
    ) -> str | None:
        """Post `message` once (see the module docstring) given its current `status` (from `status()`;
        None without reading it is right only for events no notifier has tried yet); returns its ts,
        or None when Slack refused it twice. `after_post` (idempotent follow-ups such as updating
        the parent message) runs before the result is recorded."""
        if status is not None and status["state"] == SENT:
            return str(status["ts"])
        if status is not None and status["state"] == FAILED:
            return None
        ts: str | None = None
        reconciled = False
        if status is not None:
            ts = self._find(message, status)
            reconciled = ts is not None
        else:
            self._write([*self._results, self._record(message, INTENT, {"at": time.time()})])
            self._results.clear()
            failpoint("notify-after-intent", self.store.redis, self.store.keys)
        if ts is None:
            ts = self._post(message)
            if ts is None:
                return None
            failpoint("notify-after-post", self.store.redis, self.store.keys)
        else:
            log.info("%s was already in the channel (posted before a crash); not posting again", message.key)
        if after_post is not None:
            after_post(ts)
        self._results.append(self._record(message, SENT, {"ts": ts, "reconciled": reconciled}))
        return ts

    def upload(self, message: Message, *, status: dict[str, Any] | None) -> str | None:
        """Share `message.files` once, recorded like a post (intent, then sent or failed). At least
        once, not exactly: a shared file carries no metadata to look it up by, so an upload a crash
        interrupted is made again. Any refusal, a missing `files:write` scope included, costs this
        upload only (logged, `notification.failed`); the messages go on."""
        if status is not None and status["state"] in (SENT, FAILED):
            return str(status.get("ts") or "") or None
        self._write([*self._results, self._record(message, INTENT, {"at": time.time()})])
        self._results.clear()
        self.fence.check()
        try:
            file_id = self.sink.upload(message)
        except SlackRejected as exc:
            fix = " (does the app have the files:write scope?)" if exc.setup else ""
            log.error("Slack refused the upload for %s: %s%s; the messages go on without it", message.key, exc.error,
                      fix)  # fmt: skip
            self._results.append(self._record(message, FAILED, {"error": exc.error, "attempt": FULL}))
            return None
        self._results.append(self._record(message, SENT, {"ts": file_id, "reconciled": False}))
        return file_id

    def _find(self, message: Message, status: dict[str, Any]) -> str | None:
        """The message if an earlier notifier posted it; a thread Slack refuses to read (its parent
        was deleted, say) counts as not posted."""
        try:
            return self.sink.find(channel=status["channel"], key=message.key, thread_ts=status.get("thread_ts"),
                                  oldest=status.get("at", 0.0))  # fmt: skip
        except SlackRejected as exc:
            if exc.setup:
                raise
            log.warning("could not look for %s in the channel (%s); posting it", message.key, exc.error)
            return None

    def _post(self, message: Message) -> str | None:
        """Post; on a refusal of this message, record it and post its text alone once."""
        # The text alone, in the channel itself: a thread that Slack refuses does not hold it up either.
        plain = dataclasses.replace(message, text=fallback_text(message.text), blocks=[], thread_ts=None,
                                    broadcast=False, paced=False)  # fmt: skip
        for attempt, candidate, then in ((FULL, message, "posting its text alone"), (PLAIN, plain, "giving it up")):
            try:
                return self._send(candidate)
            except SlackRejected as exc:
                if exc.setup:
                    raise
                log.error("Slack refused %s (%s, %s); %s", message.key, attempt, exc.error, then)
                self._results.append(self._record(candidate, FAILED, {"error": exc.error, "attempt": attempt}))
        return None

    def _send(self, message: Message) -> str:
        """One post (only by the lease's holder), counted for the metrics endpoint."""
        self.fence.check()
        try:
            ts = self.sink.post(message)
        except Exception as exc:
            count("slack_post_failures", error=type(exc).__name__)
            raise
        count("slack_posts")
        gauge("slack_last_post_timestamp_seconds", time.time())
        return ts

    def forget(self) -> None:
        """Drop the results not yet recorded (the lease was lost: the new holder reconciles them)."""
        self._results.clear()

    def flush(self, pipeline: Pipeline | None = None) -> None:
        """Write the results not yet recorded (into `pipeline`, a MULTI the caller executes, if given)."""
        if not self._results:
            return
        self._write(self._results, pipeline=pipeline)
        self._results.clear()

    def _record(self, message: Message, state: str, extra: dict[str, Any]) -> tuple[Event, Message, dict[str, Any]]:
        base: NotificationData = {"key": message.key, "channel": message.channel, "thread_ts": message.thread_ts,
                                  "text": message.text}  # fmt: skip
        data = {**base, **extra}  # at (intent), ts and reconciled (sent), or error and attempt (failed)
        event_type = {INTENT: t.NOTIFICATION_INTENT, SENT: t.NOTIFICATION_SENT, FAILED: t.NOTIFICATION_FAILED}[state]
        event = make_event(event_type, run=message.run, host=self.host, producer=f"notify/{self.host}",
                           seq=time_seq(), data=data)  # fmt: skip
        return event, message, {"state": state, **data}

    def _write(self, records: list[tuple[Event, Message, dict[str, Any]]], pipeline: Pipeline | None = None) -> None:
        """Events and marks in one MULTI/EXEC (fenced by the lease); records are of one run (the notifier
        flushes per feed entry). With `pipeline`, queued into the caller's fenced MULTI."""

        def fill(pipe: Pipeline) -> None:
            self.store.append([event for event, _, _ in records], pipeline=pipe)
            for _, message, mark in records:
                self.marks.save_mark(message.run, message.key, mark, pipeline=pipe)

        if pipeline is not None:
            fill(pipeline)
            return
        run = records[0][1].run
        self.fence.transaction(fill, what=f"record notifications of {run}")
        self.store.flush([message.run for _, message, _ in records])  # the outbox maps its own Redis errors

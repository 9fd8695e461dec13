"""The follow-ups stage of the notify path: what a posted message changes in messages posted before.

A resolve refreshes the run's parent message in that channel (its open rules); a stop done or a run's
failure closes it (its first line and the outcome, its Stop run and Snooze buttons gone: they could no longer
act), and so does a run that finished, which posts nothing (`finished`); the outcome of a guarded stop
closes the guard's message (its buttons go). `updates` decides them
(pure); `FollowUps` makes them, after the post and before its result is recorded (bot/delivery.py
`after_post`), so a crash in between repeats them (they are idempotent). An edit Slack refuses costs the
edit only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from trainwarden.bot import message_parts
from trainwarden.bot.blocks import text_blocks
from trainwarden.bot.delivery import Delivery
from trainwarden.bot.errors import SlackRejected
from trainwarden.bot.routing import Outgoing, copy_key
from trainwarden.bot.sink import Sink
from trainwarden.bot.stages import ENDS_THREAD, NotifyState, guard_outcome
from trainwarden.events import types as t
from trainwarden.events.envelope import Event

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Update:
    channel: str
    ts: str
    text: str


def guard_key(out: Outgoing) -> str | None:
    """The key of the guarded-stop message in `out`'s channel that `out` closes (None: it closes none)."""
    close = out.notice.close_guard
    if not close or not out.notice.guard_outcome:
        return None
    return close if out.primary else copy_key(close, out.destination.channel)


def updates(state: NotifyState, out: Outgoing, guard: dict[str, Any] | None) -> list[Update]:
    """The edits posting `out` calls for (pure); `guard` is the status of its guard_key's message."""
    notice, channel = out.notice, out.destination.channel
    found: list[Update] = []
    thread, headline = state.threads.get(channel), state.headlines.get(channel)
    if notice.update_parent and thread and headline:
        if notice.kind in ENDS_THREAD:
            found.append(Update(channel, thread, message_parts.closed(headline, run_outcome(state, out))))
        else:
            found.append(Update(channel, thread, message_parts.thread_parent(headline, state.open_rules)))
    if notice.guard_outcome and guard is not None and guard.get("ts"):
        text = message_parts.closed(guard["text"], guard_outcome(notice.guard_outcome))
        found.append(Update(guard["channel"], guard["ts"], text))
    return found


def run_outcome(state: NotifyState, out: Outgoing) -> str:
    """How the run ended, in the words of its closed parent message (`out` is a kind in ENDS_THREAD)."""
    event = out.notice.event
    if event.type == t.STOP_DONE:
        return message_parts.run_stopped(state.stop_by)
    return message_parts.run_failed(event.data.get("exit_code"))


def finished(state: NotifyState, event: Event) -> list[Update]:
    """The edits a run's end that posts nothing calls for (pure): a run that finished closes its parent in each
    channel; not after a stop was asked for (the stop's own outcome closed it, and says more)."""
    if event.type != t.RUN_FINISHED or state.stop_asked:
        return []
    return [Update(channel, ts, message_parts.closed(state.headlines[channel], message_parts.RUN_FINISHED))
            for channel, ts in state.threads.items() if state.headlines.get(channel)]  # fmt: skip


class FollowUps:
    def __init__(self, *, sink: Sink, delivery: Delivery) -> None:
        self.sink = sink
        self.delivery = delivery

    def __call__(self, state: NotifyState, out: Outgoing) -> None:
        key = guard_key(out)
        guard = self.delivery.status(out.notice.event.run, key) if key else None
        self._make(updates(state, out, guard), after=out.key)

    def finished(self, state: NotifyState, event: Event) -> None:
        """The edits of a run's end that posts nothing (see `finished`)."""
        self._make(finished(state, event), after=event.id)

    def _make(self, edits: list[Update], *, after: str) -> None:
        try:
            for u in edits:
                self.sink.update(channel=u.channel, ts=u.ts, text=u.text, blocks=text_blocks(u.text))
        except SlackRejected as exc:  # an edit Slack refuses costs the edit, not the message
            if exc.setup:
                raise
            log.error("Slack refused an update after %s: %s", after, exc)

"""The stop breaker's one Slack message (issue #38): a wrong policy held fifty STOPs; one message says so.

The first `stop.held` of an episode posts the message to the default channel (not a run's thread: it is about
many runs), with Release all and Cancel all (bot/breaker_buttons.py); each later one, while the message is
open, edits it with chat.update (the list grows). A click closes the episode; the next held STOP opens a new
one. Where the message is and what it lists is kept in Redis (events/breaker_notice.py), since it spans runs.

A held run's own ANOMALY and STOP are not posted: its STOP waited for its outcome (bot/stop_outcome.py), and
the outcome is this. Where the STOP was posted after all (no outcome within `slack.stop_outcome_wait_s`), it
is edited to say the breaker held it, as a run's parent is closed after a stop.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from trainwarden.bot import message_parts
from trainwarden.bot.blocks import breaker_blocks, text_blocks
from trainwarden.bot.delivery import SENT, Delivery
from trainwarden.bot.errors import SlackRejected
from trainwarden.bot.rate import RateLimit
from trainwarden.bot.sink import Message, Sink
from trainwarden.events import breaker_notice
from trainwarden.events.envelope import Event
from trainwarden.events.lease import Lease, Unfenced
from trainwarden.events.payloads import StopHeldData
from trainwarden.events.store import EventStore

log = logging.getLogger(__name__)


def text_of(notice: dict[str, Any]) -> str:
    """The message's words for `notice` (what events/breaker_notice.py keeps)."""
    return message_parts.breaker_held(notice.get("runs") or {}, stops=notice.get("stops"),
                                      limit=notice.get("max_stops"), window_s=notice.get("window_s"))  # fmt: skip


class BreakerNotice:
    def __init__(
        self, *, store: EventStore, sink: Sink, delivery: Delivery, rate: RateLimit, fence: Lease | Unfenced,
        channel: str,
    ) -> None:  # fmt: skip
        self.store = store
        self.sink = sink
        self.delivery = delivery
        self.rate = rate
        self.fence = fence
        self.channel = channel  # the default channel (slack.channel)

    def held(self, event: Event, *, fresh: bool) -> None:
        """A `stop.held`: post the breaker's message or add the run to the open one; say so on the run's STOP."""
        held = cast(StopHeldData, event.data)
        entry = {"rule": held.get("rule"), "reason": held.get("reason"), "decision": held.get("decision")}
        counts = {"stops": held.get("stops"), "max_stops": held.get("max_stops"), "window_s": held.get("window_s")}
        notice = breaker_notice.notice(self.store.redis, self.store.keys)
        if notice is None or notice.get("closed") or not self._add(notice, event.run, entry, counts):
            self._post(event, entry, counts, fresh=fresh)  # the first held STOP of an episode
        self._stop_held(event.run, held.get("decision"))

    def _add(self, notice: dict[str, Any], run: str, entry: dict[str, Any], counts: dict[str, Any]) -> bool:
        """Add `run` to the open message and edit it; False when a click closed it before `run` was in it."""
        notice = {**notice, **counts, "runs": {**(notice.get("runs") or {}), run: entry}}
        self._save(notice)
        now = breaker_notice.notice(self.store.redis, self.store.keys) or {}
        if now.get("episode") == notice["episode"] and now.get("closed"):
            return run in (now.get("runs") or {})  # the click acted on it (and edits the message itself)
        text = text_of(notice)
        self._edit(notice["channel"], notice["ts"], text, breaker_blocks(text, notice["episode"]))
        return True

    def _post(self, event: Event, entry: dict[str, Any], counts: dict[str, Any], *, fresh: bool) -> None:
        notice = {"episode": event.id, "channel": self.channel, "runs": {event.run: entry}, **counts}
        text = text_of(notice)
        message = Message(key=event.id, run=event.run, channel=self.channel, text=text,
                          blocks=breaker_blocks(text, event.id))  # fmt: skip
        status = None if fresh else self.delivery.status(event.run, event.id)
        if status is None or status["state"] != SENT:
            message = self.rate(message)
        ts = self.delivery.deliver(message, status=status)
        if ts is None:
            return  # refused twice (recorded): the runs stay held, `trainwarden stop RUN` releases one
        self._save({**notice, "ts": ts})

    def _save(self, notice: dict[str, Any]) -> None:
        self.fence.transaction(lambda pipe: breaker_notice.save(self.store.keys, notice, pipeline=pipe),
                               what="record the stop breaker's message")  # fmt: skip

    def _stop_held(self, run: str, decision: str | None) -> None:
        """The run's STOP message, if it was posted, says that the breaker held it (its primary copy)."""
        mark = self.delivery.status(run, decision) if decision else None
        if mark is None or mark.get("state") != SENT or not mark.get("ts"):
            return
        text = message_parts.closed(mark["text"], message_parts.stop_held())
        self._edit(mark["channel"], str(mark["ts"]), text, text_blocks(text))

    def _edit(self, channel: str, ts: str, text: str, blocks: list[dict[str, Any]]) -> None:
        try:
            self.sink.update(channel=channel, ts=ts, text=text, blocks=blocks)
        except SlackRejected as exc:  # an edit Slack refuses costs the edit, not the notifier
            if exc.setup:
                raise
            log.error("Slack refused an update of the stop breaker's message: %s", exc)

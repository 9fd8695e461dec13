"""The stop breaker's buttons (bot/breaker_notice.py posts its message): Release all and Cancel all.

Release appends a person's `stop.requested` for each run the message lists that is still held: the workers
never hold a person's stop, and carrying it out settles the run's held entry (workers/breaker.py `check`).
Cancel appends what Keep running appends (`stop.cancelled`, the rule snoozed) and takes the run off the held
list. The first click closes the episode (events/breaker_notice.py `close`, atomic): a second click, or a
click on an older message, changes nothing. Then the message is edited to its outcome in one line, no buttons.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from trainwarden.bot import message_parts, replies
from trainwarden.bot.blocks import text_blocks
from trainwarden.bot.handlers import Handlers
from trainwarden.bot.slash.base import Reply
from trainwarden.events import breaker, breaker_notice
from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.store import EventStore

log = logging.getLogger(__name__)

Update = Callable[[str, str, str, list[dict[str, Any]]], None]  # channel, ts, text, blocks: chat.update


class BreakerButtons:
    def __init__(self, *, handlers: Handlers[EventStore], update: Update) -> None:
        self.handlers = handlers
        self.store = handlers.store
        self.update = update

    def _take(self, value: dict[str, Any], user: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]] | None:
        """Close the message's episode; the message and the runs it lists that are held still (None: closed)."""
        notice = breaker_notice.close(self.store.redis, self.store.keys, episode=str(value.get("episode")), by=user)
        if notice is None:
            return None
        held = breaker.held_stops(self.store.redis, self.store.keys)
        return notice, {run: held[run] for run in notice.get("runs") or {} if run in held}

    def release(self, value: dict[str, Any], *, user: str) -> Reply:
        taken = self._take(value, user)
        if taken is None:
            return Reply(replies.breaker_already_decided())
        notice, held = taken
        for run, stop in held.items():
            reason = f"{message_parts.BUTTON_RELEASE_ALL}: {stop.get('rule')}"
            asked: p.StopRequestedData = {"by": "slack", "user": user, "reason": reason,
                                          "decision": stop.get("decision"), "rule": stop.get("rule")}  # fmt: skip
            self.handlers.append(t.STOP_REQUESTED, run, asked)
        self._closed(notice, message_parts.breaker_released(list(held), user))
        return Reply(replies.breaker_released(len(held), user))

    def cancel(self, value: dict[str, Any], *, user: str) -> Reply:
        taken = self._take(value, user)
        if taken is None:
            return Reply(replies.breaker_already_decided())
        notice, held = taken
        until = time.time() + self.handlers.config.keep_running_snooze_s
        for run, stop in held.items():
            kept = self.handlers.kept(run, user=user, rule=str(stop.get("rule")), decision=str(stop.get("decision")),
                                      until=until)  # fmt: skip
            self.store.append(kept)
            breaker.settle(self.store.redis, self.store.keys, run)
        self._closed(notice, message_parts.breaker_cancelled(list(held), user))
        return Reply(replies.breaker_cancelled(len(held), user))

    def _closed(self, notice: dict[str, Any], text: str) -> None:
        if not notice.get("ts") or not notice.get("channel"):
            return  # never posted (refused): nothing to edit
        try:
            self.update(str(notice["channel"]), str(notice["ts"]), text, text_blocks(text))
        except Exception as exc:  # the choice was carried out; only its message stays as it was
            log.error("could not update the stop breaker's message to its outcome: %s", exc)

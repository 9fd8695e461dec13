"""What each command and button does, apart from Slack: validate, append events, say what happened.

Every change is an event in the run's log (`snooze.set`, `stop.requested`, `stop.cancelled`,
`launch.failed`); the workers carry out stops, the notifier posts outcomes in the run's thread.
Methods return a `Reply`; `then`, when set, runs after the reply was sent (launches, /status's view writes).
Slash commands are objects of their own (bot/slash/, registered in bot/commands.py); `Handlers` is the
`Context` they are handled in, and handles the buttons.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Generic, TypeVar, cast

from trainwarden.bot import blocks, commands, message_parts, replies
from trainwarden.bot.config import BotConfig
from trainwarden.bot.errors import BadInput
from trainwarden.bot.slash.base import Launcher, Reply
from trainwarden.core.redact import redact_text
from trainwarden.core.words import shorten
from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.backend import RecentLog
from trainwarden.events.envelope import Event, make_event, time_seq
from trainwarden.events.projection import ENDED
from trainwarden.events.run_view import run_state
from trainwarden.events.store import Malformed, decode_entries
from trainwarden.ops import status
from trainwarden.remote.fleet import Fleet

log = logging.getLogger(__name__)

__all__ = ["Handlers", "Launcher", "Reply"]  # Launcher and Reply: bot/slash/base.py, imported from here by the wiring

GUARD_SCAN_PAGE = 1000
GUARD_SCAN_MAX = 100_000  # entries read back looking for a guarded stop's outcome


Log = TypeVar("Log", bound=RecentLog)  # the bot's EventStore (its wiring needs Redis besides), or any backend


class Handlers(Generic[Log]):
    def __init__(
        self, *, store: Log, config: BotConfig, host: str, fleet: Fleet | None, launcher: Launcher | None
    ) -> None:
        self.store = store
        self.config = config
        self.host = host
        self.fleet = fleet
        self.launcher = launcher

    def append(self, event_type: str, run: str, data: Mapping[str, object]) -> Event:
        """`data` is the type's payload (events/payloads.py), built by the caller so its keys are checked."""
        event = make_event(event_type, run=run, host=self.host, producer=f"slack/{self.host}", seq=time_seq(),
                           data=data)  # fmt: skip
        self.store.append_one(event)
        return event

    def known_run(self, name: str) -> str:
        return commands.check_name("run", name, status.known_runs(self.store))

    def ended(self, run: str) -> str | None:
        """The run's status if it has ended (stopped, finished, failed): there is nothing left to stop."""
        state = run_state(self.store, run).status
        return state if state in ENDED else None

    # -- slash commands ---------------------------------------------------------------------------

    def command(self, name: str, text: str, *, user: str) -> Reply:
        """A slash command (bot/commands.py's registry parses it, its command handles it)."""
        request = commands.parse(name, text)
        return commands.command_for(request).handle(request, self, user=user)

    # -- buttons ----------------------------------------------------------------------------------

    def stop_run(self, value: dict[str, Any], *, user: str) -> Reply:
        run = self.known_run(str(value.get("run")))
        if ended := self.ended(run):  # a stale button: the run ended since it was posted
            return Reply(replies.already_ended(run, ended))
        reason = shorten(redact_text(str(value.get("reason") or commands.DEFAULT_STOP_REASON)), commands.MAX_TEXT)
        asked: p.StopRequestedData = {"by": "slack", "user": user, "reason": reason, "decision": value.get("decision")}
        self.append(t.STOP_REQUESTED, run, asked)
        return Reply(replies.stop_requested(run, user))

    def cancel(self, value: dict[str, Any], *, user: str) -> Reply:
        return Reply(replies.stop_dismissed(str(value.get("run"))))

    def snooze(self, value: dict[str, Any], *, user: str) -> Reply:
        run = self.known_run(str(value.get("run")))
        until = time.time() + float(value.get("seconds") or self.config.keep_running_snooze_s)
        snoozed: p.SnoozeSetData = {"by": "slack", "rule": value.get("rule"), "until": until, "user": user}
        self.append(t.SNOOZE_SET, run, snoozed)
        return Reply(replies.snoozed(run, value.get("rule"), until, user), in_channel=True)

    def stop_now(self, value: dict[str, Any], *, user: str) -> Reply:
        run = self.known_run(str(value.get("run")))
        decision = str(value.get("decision"))
        if self.guard_outcome(run, decision) is not None:
            return Reply(replies.guard_already_closed(run))
        if ended := self.ended(run):
            return Reply(replies.already_ended(run, ended))
        reason = f"{message_parts.BUTTON_STOP_NOW}: {value.get('rule')}"
        asked: p.StopRequestedData = {"by": "slack", "user": user, "reason": reason, "decision": decision,
                                      "rule": value.get("rule")}  # fmt: skip
        self.append(t.STOP_REQUESTED, run, asked)
        return Reply(replies.stop_requested(run, user))

    def run_status(self, value: dict[str, Any], *, user: str) -> Reply:
        """The Status button on a run's thread messages."""
        return self.run_panel(str(value.get("run")), user=user)

    def run_panel(self, run: str | None, *, user: str) -> Reply:
        """One run's status with Snooze and (unless it ended) Stop: what a thread has instead of
        `/tw status RUN` and `/tw stop RUN`, which Slack does not deliver from threads. `run` is None
        when the message the shortcut was used on is not in a run's thread."""
        if run is None:
            raise BadInput(replies.not_in_a_run_thread())
        run = self.known_run(run)
        text = status.detail(self.store, run)
        panel = blocks.run_panel(run, text, ended=self.ended(run) is not None,
                                 snooze_s=self.config.keep_running_snooze_s)  # fmt: skip
        return Reply(text, blocks=panel)

    def keep_running(self, value: dict[str, Any], *, user: str) -> Reply:
        run = self.known_run(str(value.get("run")))
        decision, rule = str(value.get("decision")), str(value.get("rule"))
        if self.guard_outcome(run, decision) is not None:
            return Reply(replies.guard_already_closed(run))
        until = time.time() + self.config.keep_running_snooze_s
        self.store.append(self.kept(run, user=user, rule=rule, decision=decision, until=until))  # both or neither
        return Reply(replies.kept_running(run, rule, until, user))

    def kept(self, run: str, *, user: str, rule: str, decision: str, until: float) -> list[Event]:
        """What Keep running appends: the stop cancelled, and its rule snoozed until `until` (else it would stop
        the run again at the next evaluation)."""
        kept: p.StopCancelledData = {"by": "slack", "user": user, "rule": rule, "until": until, "decision": decision}
        snooze: p.SnoozeSetData = {"by": "slack", "user": user, "rule": rule, "until": until, "decision": decision}
        producer = f"slack/{self.host}"
        cancelled = make_event(t.STOP_CANCELLED, run=run, host=self.host, producer=producer, seq=time_seq(), data=kept)
        snoozed = make_event(t.SNOOZE_SET, run=run, host=self.host, producer=producer, seq=time_seq(), data=snooze)
        return [cancelled, snoozed]

    def guard_outcome(self, run: str, decision: str) -> Event | None:
        """The `stop.requested` or `stop.cancelled` that already settled a guarded stop, if any."""
        end, scanned = "+", 0
        while scanned < GUARD_SCAN_MAX:
            (entries,) = self.store.newest_pages([(run, end)], count=GUARD_SCAN_PAGE, what="read a run's recent events")
            for _sid, item in decode_entries(entries, run):
                if isinstance(item, Malformed):
                    continue
                if item.id == decision:
                    return None
                settled = cast(p.StopRequestedData | p.StopCancelledData, item.data)
                if item.type in (t.STOP_REQUESTED, t.STOP_CANCELLED) and settled.get("decision") == decision:
                    return item
            if len(entries) < GUARD_SCAN_PAGE:
                return None
            scanned += len(entries)
            end = f"({entries[-1][0].decode()}"
        return None

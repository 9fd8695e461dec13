"""Audit and authorization, as one bolt middleware in front of every command and button.

Every slash command, button click and message shortcut becomes a `command.received` event (user, channel, text with
secrets masked) in the log of the run it names (or `trainwarden.system`), so `trainwarden replay`
shows who did what. A user or channel not on the command's allow-list gets an ephemeral denial
and a `command.denied` event; the listener never runs. `/tw help` (and an unknown `/tw` subcommand,
answered with the help) runs nothing, so anyone may ask for it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from slack_bolt import BoltRequest, BoltResponse
from slack_bolt.middleware import Middleware
from trainwarden.bot import blocks, commands, replies, threads
from trainwarden.bot.config import BotConfig
from trainwarden.bot.stages import SYSTEM_RUN
from trainwarden.core.redact import redact_text
from trainwarden.events import types as t
from trainwarden.events.envelope import RUN_NAME_RE, make_event, time_seq
from trainwarden.events.history import known_run
from trainwarden.events.payloads import CommandData
from trainwarden.events.store import EventStore
from trainwarden.ops.status_messages import NAMESPACE

log = logging.getLogger(__name__)

AUDIT_TEXT_MAX = 500
ACTION_COMMAND = {
    blocks.ACTION_STOP_NOW: "stop",
    blocks.ACTION_KEEP_RUNNING: "stop",
    blocks.ACTION_STOP_RUN: "stop",
    blocks.ACTION_CANCEL: "stop",
    blocks.ACTION_SNOOZE: "snooze",
    blocks.ACTION_STATUS: "status",
    blocks.ACTION_BREAKER_RELEASE: "stop",
    blocks.ACTION_BREAKER_CANCEL: "stop",
}


@dataclass(frozen=True, slots=True)
class Request:
    """Who asked for what, read from a slash command or a button click."""

    command: str  # allow-list name: status, launch, stop, snooze; or help (allowed to anyone)
    user: str
    channel: str | None
    text: str
    via: str  # "slash" or the button's action id
    target: str | None  # the run (or experiment) the request names, if it names one
    said: str = ""  # a slash command as it was typed (`/tw stop`, `/stop`), for the audit and a denial

    @property
    def name(self) -> str:
        """What the request amounts to in the words a person would type: a button's is `/tw stop`."""
        return self.said or f"/{NAMESPACE} {self.command}"


def identify(body: dict[str, Any]) -> Request | None:
    """Pure: the request a Slack payload carries, or None for anything else."""
    if body.get("command"):
        slash, text = str(body["command"]).lstrip("/"), str(body.get("text") or "")
        args = commands.split_namespaced(text)[1] if slash == NAMESPACE else text
        first = args.split(maxsplit=1)[0] if args.split() else None
        allow = commands.allow_name(slash, text)
        said = f"/{NAMESPACE} {allow}" if slash == NAMESPACE else f"/{slash}"
        return Request(command=allow, user=str(body.get("user_id")), channel=body.get("channel_id"), text=text,
                       via="slash", target=first, said=said)  # fmt: skip
    if body.get("type") == "message_action" and body.get("callback_id") == blocks.SHORTCUT_RUN_ACTIONS:
        run = threads.run_in_metadata(body.get("message") or {})  # a person's reply names none: audited as system
        return Request(command="status", user=str((body.get("user") or {}).get("id")),
                       channel=(body.get("channel") or {}).get("id"), text=f"{blocks.SHORTCUT_RUN_ACTIONS} {run}",
                       via=blocks.SHORTCUT_RUN_ACTIONS, target=run)  # fmt: skip
    if body.get("type") == "block_actions" and body.get("actions"):
        action = body["actions"][0]
        action_id = action.get("action_id")
        if action_id not in ACTION_COMMAND:
            return None
        try:
            value = json.loads(action.get("value") or "{}")
        except ValueError:
            value = {}
        run = value.get("run") if isinstance(value, dict) else None
        return Request(command=ACTION_COMMAND[action_id], user=str((body.get("user") or {}).get("id")),
                       channel=(body.get("channel") or {}).get("id"), text=f"{action_id} {run}",
                       via=action_id, target=run)  # fmt: skip
    return None


class Audit:
    def __init__(self, *, store: EventStore, host: str, experiments: Collection[str] = ()) -> None:
        self.store = store
        self.host = host
        self.experiments = frozenset(experiments)

    def record(self, event_type: str, request: Request) -> None:
        data: CommandData = {"command": request.name, "user": request.user, "channel": request.channel,
                             "via": request.via, "text": redact_text(request.text)[:AUDIT_TEXT_MAX]}  # fmt: skip
        event = make_event(event_type, run=self._run_of(request), host=self.host, producer=f"slack/{self.host}",
                           seq=time_seq(), data=data)  # fmt: skip
        self.store.append_one(event)

    def _run_of(self, request: Request) -> str:
        name = request.target
        if not name or not RUN_NAME_RE.match(name):
            return SYSTEM_RUN
        if name in self.experiments or known_run(self.store.redis, self.store.keys, name):
            return name
        return SYSTEM_RUN


class Authorize(Middleware):
    def __init__(self, *, config: BotConfig, audit: Audit) -> None:
        self.config = config
        self.audit = audit

    def process(self, *, req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]) -> BoltResponse:
        request = identify(req.body)
        if request is None:
            return next()
        self.audit.record(t.COMMAND_RECEIVED, request)
        if commands.named(request.command).authorize(user=request.user, channel=request.channel, config=self.config):
            return next()
        self.audit.record(t.COMMAND_DENIED, request)
        log.warning("denied %s to user %s in channel %s", request.name, request.user, request.channel)
        text = replies.denied(request.name)
        if request.via == "slash":
            return BoltResponse(status=200, body={"response_type": "ephemeral", "text": text})
        respond = req.context.respond
        if respond is not None:
            respond(text=text, response_type="ephemeral", replace_original=False)
        return BoltResponse(status=200, body="")

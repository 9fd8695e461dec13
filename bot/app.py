"""The slack-bolt app: slash commands, buttons and the message shortcut routed to bot/handlers.py
behind bot/authz.py.

`/tw SUBCOMMAND` and the old top-level names (`/status`, `/stop`, ...) share one listener and one
parser (bot/commands.py): which of them Slack delivers is the manifest's choice (slack/manifest.yaml).

HTTP mode verifies every request's signature and timestamp (bolt's RequestVerification: a forged
signature or a timestamp over five minutes old is answered 401), then refuses a signature already
seen (`ReplayGuard`: a captured request sent again within those minutes is not carried out twice);
Socket Mode needs no public endpoint. Listeners acknowledge at once and empty, so Slack's 3-second
limit holds however many runs /status reads; the reply follows through the request's response_url
(`respond`), and work that takes longer (a launch) runs after it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, App, BoltRequest, BoltResponse, Respond
from slack_bolt.middleware import Middleware
from slack_sdk import WebClient
from trainwarden.bot import blocks, replies, threads
from trainwarden.bot.authz import Authorize
from trainwarden.bot.breaker_buttons import BreakerButtons
from trainwarden.bot.commands import COMMANDS
from trainwarden.bot.errors import CommandError
from trainwarden.bot.handlers import Handlers, Reply
from trainwarden.bot.limits import fit_message
from trainwarden.events.errors import StoreError
from trainwarden.events.flags import first_request
from trainwarden.events.store import EventStore
from trainwarden.ops.status_messages import NAMESPACE

log = logging.getLogger(__name__)

ButtonHandler = Callable[[dict[str, Any]], Reply]
# Slack's signing scheme accepts a timestamp up to five minutes off either way, so a signature stays
# usable for ten minutes: it is remembered that long (Redis SET NX with a TTL: every bot process
# sharing the store sees it, and memory holds only the last ten minutes' requests).
SEEN_TTL_S = 600


class ReplayGuard(Middleware):
    """Runs after bolt's signature check: the first request with a signature goes on, a repeat is 401."""

    def __init__(self, store: EventStore, ttl_s: int = SEEN_TTL_S) -> None:
        self.store = store
        self.ttl_s = ttl_s

    def process(self, *, req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]) -> BoltResponse:
        signature = (req.headers.get("x-slack-signature") or [""])[0]
        if req.mode == "socket_mode" or not signature:
            return next()
        try:
            first = first_request(self.store.redis, self.store.keys, signature, ttl_s=self.ttl_s)
        except StoreError as exc:  # without the record a replay could not be told apart: refuse
            log.warning("cannot check a Slack request for replay (%s); refused", exc)
            return BoltResponse(status=503, body={"error": "try again"})
        if not first:
            log.warning("refused a replayed Slack request (its signature was already used)")
            return BoltResponse(status=401, body={"error": "replayed request"})
        return next()


def answer(respond: Respond, command: str, **message: Any) -> None:
    """A slash command's reply, posted to its response_url (the acknowledgement went out empty)."""
    try:
        sent = respond(**message)
    except Exception:  # the reply is lost, the command's work is not: say so in the log and go on
        log.exception("could not post the reply to /%s to its response_url", command)
        return
    if sent.status_code != 200:
        log.warning("Slack refused the reply to /%s: HTTP %s %s", command, sent.status_code, sent.body[:200])


def build_app(
    *, client: WebClient, signing_secret: str | None, handlers: Handlers[EventStore], authorize: Authorize
) -> App:
    """Without a signing secret (Socket Mode), requests come over the bot's own websocket instead.
    `authorize` holds the allow-lists (its `config`, replaced on SIGHUP).

    bolt reads SLACK_BOT_TOKEN from the environment even when given a client, and then warns at every
    start that the token is unused. The client already holds the token, so the variable leaves this
    process's environment first: the warning goes, and nothing the bot starts inherits the token."""
    os.environ.pop("SLACK_BOT_TOKEN", None)
    app = App(
        client=client,
        signing_secret=signing_secret or "",
        request_verification_enabled=bool(signing_secret),
        token_verification_enabled=False,
        process_before_response=False,
        raise_error_for_unhandled_request=False,
    )
    if signing_secret:
        app.use(ReplayGuard(handlers.store))
    app.use(authorize)

    def on_command(ack: Ack, command: dict[str, Any], respond: Respond) -> None:
        ack()  # empty and at once: Slack's 3 seconds hold however long the reply takes to build
        name = str(command["command"]).lstrip("/")
        try:
            reply = handlers.command(name, str(command.get("text") or ""), user=str(command["user_id"]))
        except CommandError as exc:
            answer(respond, name, text=exc.args[0], response_type="ephemeral")
            return
        except Exception:
            log.exception("/%s failed", name)
            answer(respond, name, text=replies.internal_error(), response_type="ephemeral")
            return
        text, fitted = fit_message(reply.text, reply.blocks)  # a long reply is cut, not refused by Slack
        answer(respond, name, text=text, blocks=fitted or None,
               response_type="in_channel" if reply.in_channel else "ephemeral")  # fmt: skip
        if reply.then is not None:
            reply.then()

    for name in (NAMESPACE, *COMMANDS):
        app.command(f"/{name}")(on_command)

    def chat_update(channel: str, ts: str, text: str, blocks_: list[dict[str, Any]]) -> None:
        client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks_)

    breaker = BreakerButtons(handlers=handlers, update=chat_update)
    buttons: dict[str, Callable[..., Reply]] = {
        blocks.ACTION_BREAKER_RELEASE: breaker.release,
        blocks.ACTION_BREAKER_CANCEL: breaker.cancel,
        blocks.ACTION_STOP_NOW: handlers.stop_now,
        blocks.ACTION_KEEP_RUNNING: handlers.keep_running,
        blocks.ACTION_STOP_RUN: handlers.stop_run,
        blocks.ACTION_SNOOZE: handlers.snooze,
        blocks.ACTION_CANCEL: handlers.cancel,
        blocks.ACTION_STATUS: handlers.run_status,
    }

    def on_button(ack: Ack, body: dict[str, Any], action: dict[str, Any], respond: Respond) -> None:
        ack()
        user = str((body.get("user") or {}).get("id"))

        def handle() -> Reply:
            value = json.loads(action.get("value") or "{}")
            return buttons[action["action_id"]](value if isinstance(value, dict) else {}, user=user)

        # A private prompt (/stop's, a run's panel) is replaced by the outcome, unless that goes to the
        # channel (a snooze); a channel message keeps its buttons.
        private = bool((body.get("container") or {}).get("is_ephemeral", False))
        interact(respond, handle, what=f"button {action.get('action_id')}", private=private)

    for action_id in blocks.ACTIONS:
        app.action(action_id)(on_button)

    @app.shortcut(blocks.SHORTCUT_RUN_ACTIONS)
    def on_shortcut(ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        """A message's "Run actions": the run of its thread, privately, with Snooze and Stop."""
        ack()
        user = str((body.get("user") or {}).get("id"))
        channel = (body.get("channel") or {}).get("id")

        def handle() -> Reply:
            run = threads.thread_run(client, channel=channel, message=body.get("message") or {})
            return handlers.run_panel(run, user=user)

        interact(respond, handle, what="the Run actions shortcut", private=False)

    return app


def interact(respond: Respond, handle: Callable[[], Reply], *, what: str, private: bool) -> None:
    """A click's or a shortcut's reply through its response_url; refusals and failures privately."""
    try:
        reply = handle()
    except CommandError as exc:
        respond(text=exc.args[0], response_type="ephemeral", replace_original=False)
        return
    except Exception:
        log.exception("%s failed", what)
        respond(text=replies.internal_error(), response_type="ephemeral", replace_original=False)
        return
    text, fitted = fit_message(reply.text, reply.blocks)
    respond(text=text, blocks=fitted or None, response_type="in_channel" if reply.in_channel else "ephemeral",
            replace_original=private and not reply.in_channel)  # fmt: skip

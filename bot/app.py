"""The slack-bolt app: slash commands and buttons routed to bot/handlers.py behind bot/authz.py.

HTTP mode verifies every request's signature and timestamp (bolt's RequestVerification: a forged
signature or a timestamp over five minutes old is answered 401); Socket Mode needs no public
endpoint. Listeners acknowledge at once (ephemeral), so Slack's 3-second limit always holds;
work that takes longer (a launch) runs after the acknowledgement.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient
from trainwarden.bot import blocks, messages
from trainwarden.bot.authz import Audit, Authorize
from trainwarden.bot.config import COMMANDS, BotConfig
from trainwarden.bot.errors import CommandError
from trainwarden.bot.handlers import Handlers, Reply

log = logging.getLogger(__name__)

ButtonHandler = Callable[[dict[str, Any]], Reply]


def build_app(
    *, client: WebClient, signing_secret: str | None, config: BotConfig, handlers: Handlers, audit: Audit
) -> App:
    """Without a signing secret (Socket Mode), requests come over the bot's own websocket instead."""
    app = App(
        client=client,
        signing_secret=signing_secret or "",
        request_verification_enabled=bool(signing_secret),
        token_verification_enabled=False,
        process_before_response=False,
        raise_error_for_unhandled_request=False,
    )
    app.use(Authorize(config=config, audit=audit))

    def on_command(ack: Ack, command: dict[str, Any], respond: Respond) -> None:
        name = str(command["command"]).lstrip("/")
        try:
            reply = handlers.command(name, str(command.get("text") or ""), user=str(command["user_id"]))
        except CommandError as exc:
            ack(response_type="ephemeral", text=exc.args[0])
            return
        except Exception:
            log.exception("/%s failed", name)
            ack(response_type="ephemeral", text=messages.internal_error())
            return
        ack(response_type="in_channel" if reply.in_channel else "ephemeral", text=reply.text,
            blocks=reply.blocks or None)  # fmt: skip
        if reply.then is not None:
            reply.then()

    for name in COMMANDS:
        app.command(f"/{name}")(on_command)

    buttons: dict[str, Callable[..., Reply]] = {
        blocks.ACTION_STOP_NOW: handlers.stop_now,
        blocks.ACTION_KEEP_RUNNING: handlers.keep_running,
        blocks.ACTION_STOP_RUN: handlers.stop_run,
        blocks.ACTION_SNOOZE: handlers.snooze,
        blocks.ACTION_CANCEL: handlers.cancel,
    }

    def on_button(ack: Ack, body: dict[str, Any], action: dict[str, Any], respond: Respond) -> None:
        ack()
        user = str((body.get("user") or {}).get("id"))
        try:
            value = json.loads(action.get("value") or "{}")
            reply = buttons[action["action_id"]](value if isinstance(value, dict) else {}, user=user)
        except CommandError as exc:
            respond(text=exc.args[0], response_type="ephemeral", replace_original=False)
            return
        except Exception:
            log.exception("button %s failed", action.get("action_id"))
            respond(text=messages.internal_error(), response_type="ephemeral", replace_original=False)
            return
        # A private prompt (/stop's) is replaced by the outcome; a channel message keeps its buttons.
        private = (body.get("container") or {}).get("is_ephemeral", False)
        respond(text=reply.text, response_type="in_channel" if reply.in_channel else "ephemeral",
                replace_original=bool(private))  # fmt: skip

    for action_id in blocks.ACTIONS:
        app.action(action_id)(on_button)
    return app

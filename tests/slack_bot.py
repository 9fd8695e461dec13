"""Driving the real Slack bot in tests: start it on 127.0.0.1, send signed slash commands and clicks."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from trainwarden.bot.config import Allow, BotConfig
from trainwarden.bot.handlers import Launcher
from trainwarden.bot.service import SlackBot
from trainwarden.remote.fleet import Fleet

from tests.helpers import wait_for
from tests.slack_api import SlackAPI, sign
from trainwarden import wiring
from trainwarden.settings import Settings

SECRET = "test-signing-secret-0123"
ADMIN, VIEWER, STRANGER = "UADMIN", "UVIEWER", "USTRANGER"
ALLOW = {
    "status": Allow(users=frozenset({ADMIN, VIEWER})),
    "launch": Allow(users=frozenset({ADMIN})),
    "stop": Allow(users=frozenset({ADMIN}), channels=frozenset({"C1"})),
    "snooze": Allow(users=frozenset({ADMIN})),
}


@contextmanager
def running_bot(
    redis_url: str, api: SlackAPI, *, fleet: Fleet | None = None, launcher: Launcher | None = None
) -> Iterator[SlackBot]:
    """The bot as `trainwarden bot` wires it (HTTP mode), on a free port, posting to `api`."""
    config = BotConfig(channel="C1", allow=ALLOW, rate_per_s=1000, burst=1000, http_host="127.0.0.1", http_port=0)
    settings = Settings(redis_url=redis_url, host="testhost", slack=config, reclaim_idle_s=1)
    env = {"SLACK_BOT_TOKEN": "xoxb-test-token", "SLACK_SIGNING_SECRET": SECRET, "SLACK_API_URL": api.url}
    bot = wiring.slack_bot(settings, env, the_fleet=fleet, launcher=launcher)
    bot.notifier.reader.ensure_group()
    stop = threading.Event()
    thread = threading.Thread(target=bot.run, kwargs={"stop": stop}, daemon=True)
    thread.start()
    try:
        yield bot
    finally:
        stop.set()
        thread.join(timeout=10)


def post(bot: SlackBot, body: str, *, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    url = bot.endpoint.url  # type: ignore[attr-defined]
    request = urllib.request.Request(url, data=body.encode(), headers=headers or sign(body, SECRET))
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read().decode()
            return response.status, (json.loads(raw) if raw else {})
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def command(bot: SlackBot, api: SlackAPI, name: str, text: str, *, user: str = ADMIN,
            channel: str = "C1") -> tuple[int, dict[str, Any]]:  # fmt: skip
    body = urllib.parse.urlencode({"token": "x", "team_id": "T1", "channel_id": channel, "user_id": user,
                                   "command": f"/{name}", "text": text, "response_url": api.response_url(),
                                   "trigger_id": "t1", "api_app_id": "A1"})  # fmt: skip
    return post(bot, body)


def click(bot: SlackBot, api: SlackAPI, action_id: str, value: dict[str, Any], *, user: str = ADMIN,
          ephemeral: bool = False) -> tuple[int, dict[str, Any]]:  # fmt: skip
    payload = {"type": "block_actions", "user": {"id": user}, "channel": {"id": "C1"}, "team": {"id": "T1"},
               "api_app_id": "A1", "token": "x", "trigger_id": "t1", "response_url": api.response_url("click"),
               "container": {"type": "message", "is_ephemeral": ephemeral},
               "actions": [{"action_id": action_id, "block_id": "b1", "type": "button",
                            "value": json.dumps(value)}]}  # fmt: skip
    return post(bot, urllib.parse.urlencode({"payload": json.dumps(payload)}))


def responses(api: SlackAPI, n: int) -> list[tuple[str, dict[str, Any]]]:
    """The response_url posts, once there are at least `n`."""
    return wait_for(lambda: len(api.responses) >= n and api.responses, what=f"{n} response_url posts")

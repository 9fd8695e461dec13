"""Driving the real Slack bot in tests: start it on 127.0.0.1, send signed slash commands and clicks."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from trainwarden.bot.config import Allow, BotConfig
from trainwarden.bot.handlers import Launcher
from trainwarden.bot.service import SlackBot
from trainwarden.remote.fleet import Fleet

from tests.conftest import spawn, stop_process
from tests.helpers import wait_for
from tests.slack_api import SlackAPI, sign
from trainwarden import wiring
from trainwarden.settings import Settings

SECRET = "test-signing-secret-0123"
COMMAND_REPLY = "cmd-"  # response_url names of slash commands (clicks use others)
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


def post(bot: SlackBot | str, body: str, *, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """A request to the bot (in-process, or a process's endpoint URL), signed unless `headers` are given."""
    url = bot if isinstance(bot, str) else bot.endpoint.url  # type: ignore[attr-defined]
    request = urllib.request.Request(url, data=body.encode(), headers=headers or sign(body, SECRET))
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read().decode()
            return response.status, (json.loads(raw) if raw else {})
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def trigger_id() -> str:
    """Slack gives every interaction its own trigger_id, so no two requests it sends are identical."""
    return f"t{uuid.uuid4().hex[:12]}"


def command(bot: SlackBot | str, api: SlackAPI, name: str, text: str, *, user: str = ADMIN,
            channel: str = "C1") -> tuple[int, dict[str, Any]]:  # fmt: skip
    """The HTTP status of the acknowledgement and the reply: the acknowledgement's own body when it has
    one (a denial), else what the bot then posted to the command's response_url."""
    status, body, reply_to = send_command(bot, api, name, text, user=user, channel=channel)
    if status != 200 or body:
        return status, body
    return status, command_reply(api, reply_to)


def send_command(bot: SlackBot | str, api: SlackAPI, name: str, text: str, *, user: str = ADMIN,
                 channel: str = "C1") -> tuple[int, dict[str, Any], str]:  # fmt: skip
    """The acknowledgement (status, body) and the name of the command's response_url."""
    reply_to = f"{COMMAND_REPLY}{uuid.uuid4().hex[:8]}"
    body = urllib.parse.urlencode({"token": "x", "team_id": "T1", "channel_id": channel, "user_id": user,
                                   "command": f"/{name}", "text": text, "response_url": api.response_url(reply_to),
                                   "trigger_id": trigger_id(), "api_app_id": "A1"})  # fmt: skip
    status, ack = post(bot, body)
    return status, ack, reply_to


def command_reply(api: SlackAPI, reply_to: str, timeout: float = 10) -> dict[str, Any]:
    """What the bot posted to a command's response_url."""
    return wait_for(lambda: next((b for n, b in api.responses if n == reply_to), None), timeout=timeout,
                    what=f"the reply at response_url {reply_to}")  # fmt: skip


def click(bot: SlackBot | str, api: SlackAPI, action_id: str, value: dict[str, Any], *, user: str = ADMIN,
          ephemeral: bool = False) -> tuple[int, dict[str, Any]]:  # fmt: skip
    payload = {"type": "block_actions", "user": {"id": user}, "channel": {"id": "C1"}, "team": {"id": "T1"},
               "api_app_id": "A1", "token": "x", "trigger_id": trigger_id(), "response_url": api.response_url("click"),
               "container": {"type": "message", "is_ephemeral": ephemeral},
               "actions": [{"action_id": action_id, "block_id": "b1", "type": "button",
                            "value": json.dumps(value)}]}  # fmt: skip
    return post(bot, urllib.parse.urlencode({"payload": json.dumps(payload)}))


def shortcut(bot: SlackBot | str, api: SlackAPI, message: dict[str, Any], *, user: str = ADMIN,
             callback_id: str = "tw_run_actions") -> tuple[int, dict[str, Any]]:  # fmt: skip
    """A message shortcut used on `message` (a message of channel C1, as Slack's payload carries it)."""
    payload = {"type": "message_action", "callback_id": callback_id, "user": {"id": user}, "channel": {"id": "C1"},
               "team": {"id": "T1"}, "api_app_id": "A1", "token": "x", "trigger_id": trigger_id(),
               "response_url": api.response_url("shortcut"), "message_ts": message.get("ts"),
               "message": message}  # fmt: skip
    return post(bot, urllib.parse.urlencode({"payload": json.dumps(payload)}))


def responses(api: SlackAPI, n: int) -> list[tuple[str, dict[str, Any]]]:
    """The response_url posts of clicks (not of slash commands), once there are at least `n`."""

    def clicks() -> list[tuple[str, dict[str, Any]]]:
        return [(name, body) for name, body in api.responses if not name.startswith(COMMAND_REPLY)]

    return wait_for(lambda: len(clicks()) >= n and clicks(), what=f"{n} response_url posts")


@dataclass
class BotProcess:
    """A real `trainwarden bot` process in HTTP mode (tests/faults)."""

    proc: subprocess.Popen[bytes]
    url: str  # its Slack endpoint
    log: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def bot_process(tmp_path: Path, redis_url: str, api: SlackAPI, **settings: Any) -> Iterator[BotProcess]:
    """`trainwarden bot` as a separate process (HTTP mode on a free port, posting to `api`), up and serving."""
    port = free_port()
    slack = {"channel": "C1", "rate_per_s": 1000, "burst": 1000, "http_host": "127.0.0.1", "http_port": port,
             "deadman_s": 3600, "allow": {"status": {"users": [ADMIN, VIEWER]}, "stop": {"users": [ADMIN]},
                                          "snooze": {"users": [ADMIN]}}}  # fmt: skip
    config = tmp_path / "bot.yaml"
    config.write_text(yaml.safe_dump({"redis_url": redis_url, "host": "bothost", "workers": {"reclaim_idle_s": 1},
                                      "slack": slack, **settings}))  # fmt: skip
    env = {"SLACK_BOT_TOKEN": "xoxb-test-token", "SLACK_SIGNING_SECRET": SECRET, "SLACK_API_URL": api.url}
    log = tmp_path / "bot.log"
    proc = spawn(config, log, "bot", env=env)
    try:

        def up() -> bool:
            assert proc.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
                    return response.status == 200
            except OSError:
                return False

        wait_for(up, timeout=30, what="the bot's HTTP endpoint")
        yield BotProcess(proc=proc, url=f"http://127.0.0.1:{port}/slack/events", log=log)
    finally:
        stop_process(proc)

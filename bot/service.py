"""The Slack bot process: the notifier loop plus the command endpoint (HTTP or Socket Mode)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Protocol

from trainwarden.bot.notifier import Notifier

if TYPE_CHECKING:  # slack_bolt (the bot extra) is imported where it is used
    from slack_bolt import App

log = logging.getLogger(__name__)


class Endpoint(Protocol):
    def start(self) -> object: ...

    def stop(self) -> None: ...


class SocketModeEndpoint:
    """Socket Mode (SLACK_APP_TOKEN set): Slack pushes over a websocket the bot opens; no public port."""

    def __init__(self, app: App, app_token: str) -> None:
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        self.handler = SocketModeHandler(app, app_token)

    def start(self) -> SocketModeEndpoint:
        self.handler.connect()
        return self

    def stop(self) -> None:
        self.handler.close()


class SlackBot:
    def __init__(self, *, notifier: Notifier, endpoint: Endpoint) -> None:
        self.notifier = notifier
        self.endpoint = endpoint

    def run(self, *, stop: threading.Event) -> None:
        self.endpoint.start()
        worker = threading.Thread(target=self.notifier.run, kwargs={"stop": stop}, name="notifier", daemon=True)
        worker.start()
        try:
            stop.wait()
        finally:
            self.endpoint.stop()
            worker.join(timeout=10)

"""The Slack bot process: the notifier loop plus the command endpoint (HTTP or Socket Mode).

The loops run in threads of one process, so a loop that dies would leave a process that looks
alive and posts nothing. The service watches them: when one ends by an unexpected exception (or
ends at all before a stop was asked for) it logs the traceback once and `run` returns a non-zero
exit status, so systemd or compose restarts the bot.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from trainwarden.bot.notifier import Notifier
from trainwarden.bot.reconfigure import HasConfig

if TYPE_CHECKING:  # slack_bolt (the bot extra) is imported where it is used
    from slack_bolt import App

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 1.0  # how often the service checks that its loops are alive
EXIT_LOOP_DIED = 70  # the process's exit status when one of its loops died (EX_SOFTWARE)


class Endpoint(Protocol):
    def start(self) -> object: ...

    def stop(self) -> None: ...

    def alive(self) -> bool:
        """False once the endpoint can no longer receive requests (its thread died)."""
        ...


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

    def alive(self) -> bool:
        """The client's session and message threads (slack_sdk reconnects by itself while they run)."""
        client = self.handler.client
        runners = [getattr(client, name, None) for name in ("current_session_runner", "message_processor")]
        return all(r is None or r.is_alive() for r in runners)


def supervised(target: Callable[[], None], name: str, died: list[str], stop: threading.Event) -> threading.Thread:
    """`target` in a daemon thread; if it raises or returns before `stop`, record it in `died` and set `stop`."""

    def body() -> None:
        try:
            target()
        except BaseException:
            log.critical("the %s loop died; exiting so that the bot is restarted", name, exc_info=True)
            died.append(name)
            stop.set()
            return
        if not stop.is_set():
            log.critical("the %s loop ended unexpectedly; exiting so that the bot is restarted", name)
            died.append(name)
            stop.set()

    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    return thread


class SlackBot:
    def __init__(self, *, notifier: Notifier, endpoint: Endpoint, holders: Sequence[HasConfig] = ()) -> None:
        self.notifier = notifier
        self.endpoint = endpoint
        self.holders = tuple(holders)  # what reads the `slack:` settings per request (a SIGHUP replaces them)
        self.died: list[str] = []  # the loops that died (a non-empty list makes the exit status non-zero)

    def run(self, *, stop: threading.Event) -> int:
        """Serve until `stop`; the exit status: 0, or EXIT_LOOP_DIED when a loop died."""
        worker: threading.Thread | None = None
        try:
            self.endpoint.start()
            worker = supervised(lambda: self.notifier.run(stop=stop), "notifier", self.died, stop)
            while not stop.wait(WATCH_INTERVAL_S):
                if not self.endpoint.alive():
                    log.critical("the Slack endpoint stopped receiving requests; exiting so that the bot is restarted")
                    self.died.append("endpoint")
                    stop.set()
        except Exception:
            log.critical("the Slack bot failed; exiting so that it is restarted", exc_info=True)
            self.died.append("bot")
            stop.set()
        finally:
            self.endpoint.stop()
        if worker is not None:
            worker.join(timeout=10)
        if self.died:
            return EXIT_LOOP_DIED
        self.notifier.stopped()  # the operator stopped it: no SILENT alarm about it
        return 0

"""HTTP mode: bolt's WSGI adapter served by waitress, a production WSGI server in pure Python.

Signature and timestamp checks happen inside the app (bolt's RequestVerification), before any
listener or middleware of ours runs; a replayed signature is refused by bot/app.py's ReplayGuard.
Before that, what bolt would choke on is answered here: waitress answers a Content-Length that is
not a number (400) and a body over 1 MiB (413, not read); `SlackWSGI` answers a request timestamp
that is not a number (401) and a `payload` that is not a JSON object (400). `GET /healthz` answers
200 while the server runs.

Slow clients: waitress's inactivity timeout is refreshed by every byte, so 100 clients sending their
headers a byte a second once held all its connections for as long as they liked. `Guard` gives each
request READ_DEADLINE_S from its first byte to its last (whatever the pace; an idle connection gets the
same as its inactivity timeout), and lets one address hold at most PER_ADDRESS connections that have sent
no whole request for GRACE_S or longer (the oldest beyond are closed, within a second), so one client cannot
take the connections Slack's requests need. Only those count: behind nginx, a tunnel or a load balancer every
request comes from one address, and a cap on all its connections turned Slack's own away (300 concurrent
commands: 36 answered). A connection younger than GRACE_S is not capped (a client that has just connected
may not have written yet); the pool (CONNECTIONS) is large enough that those cannot take it.

Waitress parses requests in its own loop and runs the app in a few threads; the app only waits for
a listener's acknowledgement (at once), so a handful of threads carries any command rate Slack sends.
"""

from __future__ import annotations

import errno
import functools
import logging
import re
import socket
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from slack_bolt import App, BoltRequest, BoltResponse
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_bolt.adapter.wsgi.http_request import WsgiHttpRequest
from trainwarden.bot.errors import EndpointUnavailable
from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer, create_server

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

log = logging.getLogger(__name__)

PATH = "/slack/events"
HEALTH_PATH = "/healthz"
MAX_BODY = 1 << 20
THREADS = 4  # requests handled at once; each waits only for an acknowledgement
TIMESTAMP_RE = re.compile(r"[0-9]{1,12}")  # Unix seconds, ASCII digits only
READ_DEADLINE_S = 10  # seconds from a request's first byte to its last (and an idle connection's life)
PER_ADDRESS = 20  # connections one address may hold that sent no whole request in GRACE_S
GRACE_S = 2.0  # a connection waiting this long for its request (since its accept or the request's first byte) is slow
CONNECTIONS = 500  # connections held at once (waitress's default, 100, was the limit with a cap on every connection)
MAX_HEADERS = 64 << 10  # a request's headers (waitress's default, 256 KiB, times CONNECTIONS is memory to spare)
SAID_EVERY_S = 60.0  # a refused or dropped address is logged at most this often


class SlackWSGI(SlackRequestHandler):
    """Bolt's WSGI handler with the answers bolt itself would not give (see the module docstring)."""

    def dispatch(self, request: WsgiHttpRequest) -> BoltResponse:
        try:
            bolt_request = BoltRequest(body=request.get_body(), query=request.query_string,
                                       headers=request.get_headers())  # fmt: skip
        except (ValueError, TypeError, AttributeError):  # a `payload` that is not a JSON object
            return BoltResponse(status=400, body="bad body")
        return self.app.dispatch(bolt_request)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method, path = environ.get("REQUEST_METHOD"), environ.get("PATH_INFO")
        if method == "GET" and path == HEALTH_PATH:
            return _plain(start_response, "200 OK", b"ok")
        stamp = environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP")
        if method == "POST" and path == self.path and stamp is not None and not TIMESTAMP_RE.fullmatch(stamp.strip()):
            return _plain(start_response, "401 Unauthorized", b"bad request timestamp")
        return super().__call__(environ, start_response)


def _plain(start_response: StartResponse, status: str, body: bytes) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
    return [body]


class DeadlinedChannel(HTTPChannel):
    """A connection that knows when the request it is reading began (its first byte; its accept before)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.started = time.time()  # waitress's clock (its maintenance is given time.time())
        super().__init__(*args, **kwargs)

    def received(self, data: bytes) -> bool:
        if self.request is None and data:
            self.started = time.time()
        return bool(super().received(data))

    def waiting(self) -> bool:
        """No whole request yet (none sent, headers or body still coming, or idle between two): what is capped."""
        return not self.requests and not self.will_close and not self.close_when_flushed


def _address(addr: Any) -> str:
    """A client's address as waitress gives it: (host, port) for TCP, a path for a Unix socket."""
    return str(addr[0]) if isinstance(addr, tuple) else str(addr)


class Guard:
    """The read deadline and the per-address cap, installed on each listening server waitress made."""

    def __init__(self) -> None:
        self._said: dict[tuple[str, str], float] = {}

    def install(self, sockets: dict[int, Any]) -> None:
        for dispatcher in list(sockets.values()):
            if isinstance(dispatcher, BaseWSGIServer):
                server = dispatcher  # instance attributes: waitress calls self.channel_class(self, ...)
                server.channel_class = self.channel  # type: ignore[assignment]
                server.maintenance = functools.partial(self.maintenance, server)  # type: ignore[method-assign]

    def channel(self, server: Any, conn: socket.socket, addr: Any, adj: Any, map: Any = None) -> HTTPChannel:
        return DeadlinedChannel(server, conn, addr, adj, map=map)

    def maintenance(self, server: Any, now: float) -> None:
        """waitress's own (idle connections), the deadline on a request being read, and the per-address cap."""
        type(server).maintenance(server, now)  # the class's: the instance's is this
        stalled: dict[str, list[DeadlinedChannel]] = {}
        for channel in list(server.active_channels.values()):
            if not isinstance(channel, DeadlinedChannel) or not channel.waiting():
                continue
            host = _address(channel.addr)
            if channel.request is not None and now - channel.started > READ_DEADLINE_S:
                channel.will_close = True
                self._say(host, "dropped", f"dropping connections from {host} that sent no whole request in "
                                           f"{READ_DEADLINE_S}s")  # fmt: skip
            elif now - channel.started >= GRACE_S:
                stalled.setdefault(host, []).append(channel)
        for host, channels in stalled.items():
            if len(channels) > PER_ADDRESS:
                channels.sort(key=lambda c: c.started)
                for channel in channels[: len(channels) - PER_ADDRESS]:
                    channel.will_close = True  # closed by waitress's loop at once: no request of it is served
                self._say(host, "capped", f"closing {len(channels) - PER_ADDRESS} connections from {host}: it held "
                                          f"{len(channels)} that sent no whole request in {GRACE_S:g}s "
                                          f"(at most {PER_ADDRESS})")  # fmt: skip

    def _say(self, host: str, kind: str, text: str) -> None:
        now = time.monotonic()
        if now - self._said.get((host, kind), -SAID_EVERY_S) >= SAID_EVERY_S:
            self._said[host, kind] = now
            if len(self._said) > 10_000:
                self._said.clear()
            log.warning("%s (said once a minute per address)", text)


def _listening(sockets: dict[int, Any]) -> tuple[str, int]:
    """The (host, port) the server listens on (the port the system chose when asked for port 0)."""
    for dispatcher in sockets.values():
        if getattr(dispatcher, "accepting", False) and dispatcher.socket is not None:
            host, port = dispatcher.socket.getsockname()[:2]
            return str(host), int(port)
    raise OSError("the Slack HTTP server has no listening socket")


class SlackHTTPServer:
    """The bot's HTTP endpoint: `start` serves in a thread, `stop` closes every connection."""

    def __init__(self, app: App, *, host: str, port: int, path: str = PATH) -> None:
        self.path = path
        # the listening socket and every connection (waitress's dispatchers, typed loosely by its stubs)
        self.sockets: dict[int, Any] = {}
        self.server = create_server(SlackWSGI(app, path), map=self.sockets, host=host, port=port, threads=THREADS,
                                    max_request_body_size=MAX_BODY, ident="trainwarden",
                                    channel_timeout=READ_DEADLINE_S, cleanup_interval=1, connection_limit=CONNECTIONS,
                                    max_request_header_size=MAX_HEADERS, asyncore_use_poll=True)  # fmt: skip
        Guard().install(self.sockets)
        self.address = _listening(self.sockets)
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @classmethod
    def listen(cls, app: App, *, host: str, port: int) -> SlackHTTPServer:
        """The server listening on host:port, or one line saying why it cannot (the port taken, say)."""
        try:
            return cls(app, host=host, port=port)
        except OSError as exc:
            why = exc.strerror or str(exc)
            taken = "another process listens there (a second `trainwarden bot`?): stop it, or set slack.http_port"
            hint = taken if exc.errno == errno.EADDRINUSE else "check slack.http_host and slack.http_port"
            raise EndpointUnavailable(
                f"the Slack HTTP endpoint cannot listen on {host}:{port}: {why}; {hint}"
            ) from None

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}{self.path}"

    def start(self) -> SlackHTTPServer:
        self._thread = threading.Thread(target=self._serve, name="slack-http", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        try:
            self.server.run()
        except BaseException as exc:
            if self._stopping.is_set() and isinstance(exc, OSError | ValueError):
                return  # `stop` closed the sockets while the loop was in select() (EBADF): the planned end
            log.critical("the Slack HTTP server died", exc_info=True)
            raise

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Close the listening socket and every connection (the serving loop ends with its last one)."""
        self._stopping.set()
        self.server.task_dispatcher.shutdown(cancel_pending=True, timeout=5)
        wasyncore.close_all(self.sockets)

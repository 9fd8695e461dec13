"""HTTP mode: a small threaded server that hands Slack's requests to the bolt app.

Signature and timestamp checks happen inside the app (bolt's RequestVerification), before any
listener or middleware of ours runs; a replayed signature is refused by bot/app.py's ReplayGuard.
Before that, this server answers what bolt would choke on: a Content-Length that is not a number
(400), a body over 1 MiB (413, not read), a request timestamp that is not a number (401), a
`payload` that is not a JSON object (400).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

from slack_bolt import App, BoltRequest

log = logging.getLogger(__name__)

PATH = "/slack/events"
MAX_BODY = 1 << 20
DRAIN_S = 0.2  # how long a refused request's unread body is waited for
TIMESTAMP_RE = re.compile(r"[0-9]{1,12}")  # Unix seconds, ASCII digits only


class SlackHTTPServer:
    def __init__(self, app: App, *, host: str, port: int, path: str = PATH) -> None:
        handler = _handler(app, path)
        self.server = ThreadingHTTPServer((host, port), handler)
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server.socket.getsockname()[:2]  # str here; server_address is typed str | bytes
        return f"http://{host}:{port}{PATH}"

    def start(self) -> SlackHTTPServer:
        self._thread = threading.Thread(target=self._serve, name="slack-http", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        try:
            self.server.serve_forever()
        except BaseException:
            log.critical("the Slack HTTP server died", exc_info=True)
            raise

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(app: App, path: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            url = urlparse(self.path)
            if url.path != path:
                self._reply(404, b"not found")
                return
            raw_length = (self.headers.get("Content-Length") or "0").strip()
            if not raw_length.isascii() or not raw_length.isdigit():
                self._refuse(400, b"bad Content-Length")  # where the body ends is unknown
                return
            length = int(raw_length)
            if length > MAX_BODY:
                self._refuse(413, b"too large")
                return
            body = self.rfile.read(length).decode("utf-8", "replace")
            stamp = self.headers.get("X-Slack-Request-Timestamp")
            if stamp is not None and not TIMESTAMP_RE.fullmatch(stamp.strip()):
                self._reply(401, b"bad request timestamp")
                return
            headers: dict[str, str | Sequence[str]] = {k.lower(): v for k, v in self.headers.items()}
            try:
                request = BoltRequest(body=body, query=url.query, headers=headers)
            except (ValueError, TypeError, AttributeError):  # a `payload` that is not a JSON object
                self._reply(400, b"bad body")
                return
            response = app.dispatch(request)
            data = response.body.encode()
            self.send_response(response.status)
            for name, values in response.headers.items():
                for value in values:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._reply(200 if self.path == "/healthz" else 404, b"ok" if self.path == "/healthz" else b"not found")

        def _reply(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refuse(self, status: int, data: bytes) -> None:
            """Answer, then close the connection, discarding what the client still sends for a while
            (closing with unread data would reset the connection before the client reads the answer)."""
            self.close_connection = True
            self._reply(status, data)
            self.wfile.flush()
            self.connection.settimeout(DRAIN_S)
            left = MAX_BODY
            try:
                while left > 0 and (chunk := self.connection.recv(min(left, 65536))):
                    left -= len(chunk)
            except OSError:
                pass

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    return Handler

"""HTTP mode: a small threaded server that hands Slack's requests to the bolt app.

Signature and timestamp checks happen inside the app (bolt's RequestVerification), before any
listener or middleware of ours runs. Bodies over 1 MiB are refused without being read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

from slack_bolt import App, BoltRequest

log = logging.getLogger(__name__)

PATH = "/slack/events"
MAX_BODY = 1 << 20


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
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._reply(413, b"too large")
                return
            body = self.rfile.read(length).decode("utf-8", "replace")
            headers: dict[str, str | Sequence[str]] = {k.lower(): v for k, v in self.headers.items()}
            response = app.dispatch(BoltRequest(body=body, query=url.query, headers=headers))
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

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    return Handler

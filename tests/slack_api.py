"""A local HTTP server speaking the Slack Web API shapes the bot uses, with faults on demand.

Methods: auth.test, chat.postMessage, chat.update, conversations.history, conversations.replies,
files.getUploadURLExternal, the upload URL it hands out (/upload/<file id>: a POST of the bytes,
refused with 400 unless a `.png` is a PNG and the length is the one announced),
files.completeUploadExternal, and response_url posts (/response/<id>). Tests read what it
received: messages (with threads, blocks, metadata), shared files (`uploads`: bytes, name,
channel, thread, comment), every call, response_url bodies. Faults are queued per method: "429" (with
Retry-After), "500", "reset" (connection dropped, nothing posted), "reset-after-post" (the message
is posted, then the connection is dropped: the reply is lost), "refuse:ERROR" (ok=false with that
error, nothing posted). Like Slack, it refuses a message over Slack's documented limits
(`slack_violations`: msg_too_long, invalid_blocks), checked here independently of bot/limits.py.
`down()` and `up()` make it unreachable (connection refused) for a while, on the same port after.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import socket
import struct
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from slack_sdk import WebClient
from trainwarden.bot.slack_sink import RateLimiter, SlackSink


@dataclass
class Posted:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    broadcast: bool
    metadata: dict[str, Any] | None
    updates: list[str] = field(default_factory=list)  # texts it was updated to

    @property
    def key(self) -> str | None:
        return ((self.metadata or {}).get("event_payload") or {}).get("key")

    def as_api(self, with_metadata: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "message", "ts": self.ts, "text": self.text, "blocks": self.blocks}
        if self.thread_ts:
            out["thread_ts"] = self.thread_ts
        if with_metadata and self.metadata:
            out["metadata"] = self.metadata
        return out


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass
class Uploaded:
    """A file shared by files.completeUploadExternal."""

    file_id: str
    filename: str
    title: str
    data: bytes
    channel: str | None
    thread_ts: str | None
    comment: str | None


class SlackAPI:
    def __init__(self, *, retry_after: int = 1) -> None:
        self.retry_after = retry_after
        self.messages: list[Posted] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.responses: list[tuple[str, dict[str, Any]]] = []
        self.faults: dict[str, list[str]] = {}
        self.refused: list[tuple[str, list[str]]] = []  # calls refused (over a limit or by a "refuse:" fault)
        self.post_times: dict[str, float] = {}  # metadata key -> perf_counter when it arrived (benchmarks)
        self.uploads: list[Uploaded] = []
        self.upload_slots: dict[str, dict[str, Any]] = {}  # file id -> filename, length, data once POSTed
        self.lock = threading.Lock()
        self._ts = itertools.count(1)
        self.server = self._serve(0)
        self._port: int = self.server.server_address[1]

    def _serve(self, port: int) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return server

    def down(self) -> None:
        """Slack unreachable: nothing listens on the port any more (connection refused) until `up`."""
        self.close()

    def up(self) -> None:
        """Listening again, on the same port, with what it received so far."""
        self.server = self._serve(self._port)

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self, name: str = "r1") -> str:
        return f"http://127.0.0.1:{self.port}/response/{name}"

    def fail(self, method: str, *kinds: str) -> None:
        with self.lock:
            self.faults.setdefault(method, []).extend(kinds)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- views for tests --------------------------------------------------------------------------

    def parents(self) -> list[Posted]:
        return [m for m in self.messages if m.thread_ts is None]

    def replies(self, thread_ts: str) -> list[Posted]:
        return [m for m in self.messages if m.thread_ts == thread_ts]

    def texts(self) -> list[str]:
        return [m.text for m in self.messages]

    def count(self, method: str) -> int:
        return sum(1 for name, _ in self.calls if name == method)

    # -- methods ----------------------------------------------------------------------------------

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.calls.append((method, params))
            if method == "auth.test":
                return {"ok": True, "user_id": "UBOT", "bot_id": "BBOT", "team_id": "T1", "url": "https://x.test/"}
            if method in ("chat.postMessage", "chat.update") and (problems := slack_violations(params)):
                self.calls.append((method + ":refused", params))
                self.refused.append((method, problems))
                error = "msg_too_long" if any(p.startswith("text") for p in problems) else "invalid_blocks"
                return {"ok": False, "error": error, "response_metadata": {"messages": problems}}
            if method == "chat.postMessage":
                arrived = time.perf_counter()
                reply = self._post(params)
                self.post_times[self.messages[-1].key or str(len(self.messages))] = arrived
                return reply
            if method == "chat.update":
                return self._update(params)
            if method in ("conversations.history", "conversations.replies"):
                return self._read(method, params)
            if method == "files.getUploadURLExternal":
                file_id = f"F{len(self.upload_slots) + 1:08d}"
                self.upload_slots[file_id] = {"filename": params.get("filename"), "length": int(params["length"])}
                return {"ok": True, "file_id": file_id, "upload_url": f"http://127.0.0.1:{self.port}/upload/{file_id}"}
            if method == "files.completeUploadExternal":
                return self._complete(params)
        return {"ok": False, "error": "unknown_method"}

    def _post(self, params: dict[str, Any]) -> dict[str, Any]:
        blocks = params.get("blocks") or []
        metadata = params.get("metadata")
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        if isinstance(metadata, str):
            metadata = json.loads(metadata)
        ts = f"{1_800_000_000 + next(self._ts)}.000100"
        posted = Posted(channel=params["channel"], ts=ts, text=params.get("text", ""), blocks=blocks,
                        thread_ts=params.get("thread_ts"), broadcast=_true(params.get("reply_broadcast")),
                        metadata=metadata)  # fmt: skip
        self.messages.append(posted)
        return {"ok": True, "channel": posted.channel, "ts": ts, "message": posted.as_api(True)}

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        for m in self.messages:
            if m.ts == params.get("ts") and m.channel == params.get("channel"):
                m.text = params.get("text", m.text)
                blocks = params.get("blocks") or m.blocks
                m.blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
                m.updates.append(m.text)
                return {"ok": True, "channel": m.channel, "ts": m.ts, "text": m.text}
        return {"ok": False, "error": "message_not_found"}

    def receive_upload(self, file_id: str, data: bytes) -> str | None:
        """The bytes POSTed to an upload URL; the problem if Slack would not take them."""
        with self.lock:
            self.calls.append(("upload", {"file_id": file_id, "length": len(data)}))
            slot = self.upload_slots.get(file_id)
            if slot is None:
                problem = "unknown upload URL"
            elif len(data) != slot["length"]:
                problem = f"{len(data)} bytes, announced {slot['length']}"
            elif str(slot["filename"]).endswith(".png") and not data.startswith(PNG_MAGIC):
                problem = f"{slot['filename']} is not a PNG"
            else:
                slot["data"] = data
                return None
            self.refused.append(("upload", [problem]))
            return problem

    def _complete(self, params: dict[str, Any]) -> dict[str, Any]:
        files = json.loads(params.get("files") or "[]")
        slots = [(f, self.upload_slots.get(f.get("id"), {})) for f in files]
        if not files or any("data" not in slot for _, slot in slots):
            return {"ok": False, "error": "file_upload_not_complete" if files else "invalid_arguments"}
        for f, slot in slots:
            self.uploads.append(Uploaded(file_id=f["id"], filename=slot["filename"], title=f.get("title") or "",
                                         data=slot["data"], channel=params.get("channel_id"),
                                         thread_ts=params.get("thread_ts"),
                                         comment=params.get("initial_comment")))  # fmt: skip
        return {"ok": True, "files": [{"id": f["id"], "title": f.get("title")} for f in files]}

    def _read(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        meta = _true(params.get("include_all_metadata"))
        channel = params.get("channel")
        if method == "conversations.replies":
            ts = params.get("ts")
            found = [m for m in self.messages if m.channel == channel and ts in (m.ts, m.thread_ts)]
        else:
            oldest = float(params.get("oldest") or 0)
            found = [m for m in self.messages if m.channel == channel and (m.thread_ts is None or m.broadcast)
                     and float(m.ts) >= oldest][::-1]  # fmt: skip
        start = int(params.get("cursor") or 0)
        limit = int(params.get("limit") or 100)
        page = found[start : start + limit]
        more = start + limit < len(found)
        return {"ok": True, "messages": [m.as_api(meta) for m in page], "has_more": more,
                "response_metadata": {"next_cursor": str(start + limit) if more else ""}}  # fmt: skip


def slack_violations(params: dict[str, Any]) -> list[str]:
    """What Slack would refuse in a chat.postMessage / chat.update (its Block Kit reference's limits)."""
    blocks = params.get("blocks") or []
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    text = params.get("text") or ""
    out = [f"text: {len(text)} > 40000"] if len(text) > 40_000 else []
    if not text and not blocks:
        out.append("text: no text and no blocks")
    if len(blocks) > 50:
        out.append(f"blocks: {len(blocks)} > 50")

    def over(what: str, value: Any, limit: int) -> None:
        if isinstance(value, dict):
            value = value.get("text")
        if isinstance(value, str) and len(value) > limit:
            out.append(f"{what}: {len(value)} > {limit}")

    for i, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "section":
            over(f"[{i}] section text", block.get("text"), 3000)
            fields = block.get("fields") or []
            if len(fields) > 10:
                out.append(f"[{i}] section fields: {len(fields)} > 10")
            for f in fields:
                over(f"[{i}] section field", f, 2000)
        elif kind == "header":
            over(f"[{i}] header", block.get("text"), 150)
        elif kind == "context":
            elements = block.get("elements") or []
            if len(elements) > 10:
                out.append(f"[{i}] context elements: {len(elements)} > 10")
            for e in elements:
                over(f"[{i}] context element", e, 2000)
        elif kind == "actions":
            elements = block.get("elements") or []
            if len(elements) > 25:
                out.append(f"[{i}] actions elements: {len(elements)} > 25")
            for e in elements:
                over(f"[{i}] button text", e.get("text"), 75)
                over(f"[{i}] button value", e.get("value"), 2000)
                confirm = e.get("confirm") or {}
                for name, limit in (("title", 100), ("text", 300), ("confirm", 30), ("deny", 30)):
                    over(f"[{i}] confirm {name}", confirm.get(name), limit)
    return out


def _true(value: Any) -> bool:
    return value in (True, "true", "True", "1", 1)


def _handler(api: SlackAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _params(self) -> dict[str, Any]:
            url = urllib.parse.urlparse(self.path)
            params: dict[str, Any] = dict(urllib.parse.parse_qsl(url.query))
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if raw and "json" in (self.headers.get("Content-Type") or ""):
                params.update(json.loads(raw))
            elif raw:
                params.update(urllib.parse.parse_qsl(raw.decode()))
            return params

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            path = urllib.parse.urlparse(self.path).path
            if path.startswith("/upload/"):  # the upload URL: raw bytes, no token (the URL is the secret)
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                problem = api.receive_upload(path.rsplit("/", 1)[1], data)
                body = (problem or f"OK - {len(data)}").encode()
                self.send_response(400 if problem else 200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            params = self._params()
            if path.startswith("/response/"):
                with api.lock:
                    api.responses.append((path.rsplit("/", 1)[1], params))
                self._json(200, {"ok": True})
                return
            method = path.removeprefix("/api/")
            with api.lock:
                queue = api.faults.get(method) or []
                fault = queue.pop(0) if queue else None
            if fault == "429":
                with api.lock:
                    api.calls.append((method + ":429", params))
                self._json(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(api.retry_after)})
            elif fault == "500":
                with api.lock:
                    api.calls.append((method + ":500", params))
                self._json(500, {"ok": False, "error": "internal_error"})
            elif fault is not None and fault.startswith("refuse:"):
                with api.lock:
                    api.calls.append((method + ":refused", params))
                    api.refused.append((method, [fault]))
                self._json(200, {"ok": False, "error": fault.removeprefix("refuse:")})
            elif fault in ("reset", "reset-after-post"):
                if fault == "reset-after-post":
                    api.call(method, params)
                self._reset()
            elif not (self.headers.get("Authorization") or "").startswith("Bearer "):
                self._json(200, {"ok": False, "error": "not_authed"})
            else:
                self._json(200, api.call(method, params))

        def _json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _reset(self) -> None:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()

        def log_message(self, format: str, *args: object) -> None:
            return None

    return Handler


def sign(body: str, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Headers Slack would send with `body` (the v0 signing scheme)."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}",
            "Content-Type": "application/x-www-form-urlencoded"}  # fmt: skip


def sink_for(api: SlackAPI, *, rate_per_s: float = 10_000, burst: int = 10_000) -> SlackSink:
    """The bot's real sink, pointed at the local server, with limits that do not slow tests down."""
    client = WebClient(token="xoxb-test-token", base_url=api.url, retry_handlers=[])
    return SlackSink(client=client, limiter=RateLimiter(rate_per_s=rate_per_s, burst=burst), backoff_s=0.01)

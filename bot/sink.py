"""Where notifications go: the `Sink` protocol, and the console sink used without a Slack token."""

from __future__ import annotations

import itertools
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

METADATA_TYPE = "trainwarden_notification"  # Slack message metadata event_type carrying the key


@dataclass(frozen=True, slots=True)
class Message:
    """One post: `key` travels in the message's metadata so a restarted notifier can find it."""

    key: str
    run: str
    channel: str
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    thread_ts: str | None = None
    broadcast: bool = False
    files: tuple[tuple[str, bytes], ...] = ()  # (file name, bytes) to upload, `text` their comment (upload())
    paced: bool = False  # the notify path's rate-limit stage took its channel's token (bot/rate.py)

    @property
    def metadata(self) -> dict[str, Any]:
        return {"event_type": METADATA_TYPE, "event_payload": {"key": self.key, "run": self.run}}


class Sink(Protocol):
    def post(self, message: Message) -> str:
        """Post and return the message's ts (its id in the channel)."""
        ...

    def update(self, *, channel: str, ts: str, text: str, blocks: list[dict[str, Any]]) -> None: ...

    def upload(self, message: Message) -> str:
        """Share `message.files` in its channel and thread with `text` as their comment; returns a file id."""
        ...

    def find(self, *, channel: str, key: str, thread_ts: str | None, oldest: float) -> str | None:
        """The ts of an earlier post carrying `key` in its metadata, if the channel has one."""
        ...


class ConsoleSink:
    """Without a Slack token: the same words, printed. Updates and reconciliation do not apply."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self._ts = itertools.count(1)

    def post(self, message: Message) -> str:
        stamp = time.strftime("%H:%M:%S")
        print(f"[{stamp}] {message.text}", file=self.stream, flush=True)
        return f"console.{next(self._ts)}"

    def update(self, *, channel: str, ts: str, text: str, blocks: list[dict[str, Any]]) -> None:
        return None

    def upload(self, message: Message) -> str:
        files = ", ".join(f"{name} ({len(data) // 1024 + 1} KB)" for name, data in message.files)
        print(f"[{time.strftime('%H:%M:%S')}] {message.text} [{files}]", file=self.stream, flush=True)
        return f"console.{next(self._ts)}"

    def find(self, *, channel: str, key: str, thread_ts: str | None, oldest: float) -> str | None:
        return None

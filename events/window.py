"""A bounded window of JSON records kept in their encoded form until someone reads them.

A run's state keeps its 50 recent metrics for the trend, the evidence pack and /status; a worker
turn at 1 Hz adds one and reads none. Encoding the 50 as JSON on every checkpoint write and
decoding them on every read was about a third of a worker's CPU per event (0.13 ms to encode,
0.12 ms to decode, floats mostly). Here a record is encoded once, when first written, and decoded
only when the window is read; `lines()` and `from_lines()` are the checkpoint's stored form (one
JSON document a line: `json.dumps` writes no newline, and escapes those in strings).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

_ENCODER = json.JSONEncoder(separators=(", ", ": "))  # json.dumps' own defaults, made once


class EncodedWindow:
    """The last `maxlen` records appended; reads as a sequence of dicts (iteration, `len`, `[i]`)."""

    __slots__ = ("_items", "maxlen")

    def __init__(self, records: Iterable[dict[str, Any] | str] = (), *, maxlen: int) -> None:
        self.maxlen = maxlen
        self._items: deque[dict[str, Any] | str] = deque(records, maxlen=maxlen)  # a str: not decoded yet

    @classmethod
    def from_lines(cls, text: str, *, maxlen: int) -> EncodedWindow:
        return cls(text.split("\n") if text else (), maxlen=maxlen)

    def lines(self) -> str:
        """The stored form; records appended since the last call are encoded now, once."""
        encode = _ENCODER.encode
        self._items = deque((x if isinstance(x, str) else encode(x) for x in self._items), maxlen=self.maxlen)
        return "\n".join(self._items)  # type: ignore[arg-type]  # every item is a str now

    def append(self, record: dict[str, Any]) -> None:
        self._items.append(record)

    def _decoded(self) -> deque[dict[str, Any] | str]:
        loads = json.loads
        self._items = deque((loads(x) if isinstance(x, str) else x for x in self._items), maxlen=self.maxlen)
        return self._items

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._decoded())  # type: ignore[arg-type]  # every item is a dict now

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self._decoded()[index]  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EncodedWindow):
            return self.maxlen == other.maxlen and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like the deque it stands for

    def __repr__(self) -> str:
        return f"EncodedWindow({list(self)!r}, maxlen={self.maxlen})"

"""Pure encode/decode between `Event` and the bytes stored in one stream-entry field.

Metric values may be NaN or +/-Inf (that is what the product watches for), so the JSON is
Python's dialect: `NaN`, `Infinity` and `-Infinity` are written bare. Everything trainwarden
reads back (replay, archives) uses this codec.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from events.envelope import ENVELOPE_VERSION, Event
from events.errors import DecodeError

FIELD = "e"
FIELD_BYTES = b"e"

_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=True, ensure_ascii=False).encode
_loads = json.JSONDecoder().decode  # accepts NaN/Infinity like json.loads, without its per-call checks

# (type, version) -> function turning that version's data into the next version's data.
Upgrader = Callable[[dict[str, Any]], dict[str, Any]]
UPGRADERS: dict[tuple[str, int], Upgrader] = {}


def encode(event: Event) -> bytes:
    """The stored form: one compact JSON object holding the whole envelope."""
    return _dumps(
        {
            "id": event.id,
            "type": event.type,
            "v": event.v,
            "run": event.run,
            "host": event.host,
            "ts": event.ts,
            "seq": event.seq,
            "data": event.data,
        }
    ).encode()


def decode(raw: bytes | str) -> Event:
    """Parse and validate one stored event; raises DecodeError saying what is wrong."""
    try:
        obj = _loads(raw.decode() if type(raw) is bytes else raw)  # we always write UTF-8
    except (ValueError, UnicodeDecodeError) as exc:
        raise DecodeError(f"not valid JSON: {exc}") from exc
    if type(obj) is not dict:
        raise DecodeError(f"expected a JSON object, got {type(obj).__name__}")
    try:
        event_id = obj["id"]
        event_type = obj["type"]
        version = obj["v"]
        run = obj["run"]
        host = obj["host"]
        ts = obj["ts"]
        seq = obj["seq"]
        data = obj["data"]
    except KeyError as exc:
        raise DecodeError(f"missing envelope field {exc.args[0]!r}", event_id=obj.get("id")) from None
    if type(event_id) is not str or type(event_type) is not str or type(run) is not str or type(host) is not str:
        raise DecodeError("id, type, run and host must be strings", event_id=event_id)
    if type(seq) is not int or type(version) is not int or version < 1:
        raise DecodeError("seq and v must be integers (v >= 1)", event_id=event_id)
    if type(ts) is not float and type(ts) is not int:
        raise DecodeError(f"ts must be a number, got {type(ts).__name__}", event_id=event_id)
    if type(data) is not dict:
        raise DecodeError(f"data must be an object, got {type(data).__name__}", event_id=event_id)
    if not event_id.endswith(f":{seq}"):
        raise DecodeError(f"id {event_id!r} does not end with its seq {seq}", event_id=event_id)
    if version < ENVELOPE_VERSION or (event_type, version) in UPGRADERS:
        version, data = _upgrade(event_type, version, data)
    return Event(id=event_id, type=event_type, run=run, host=host, ts=ts, seq=seq, data=data, v=version)


def decode_fields(fields: Mapping[bytes, bytes]) -> Event:
    """Decode a stream entry's field map as returned by redis-py (bytes keys)."""
    raw = fields.get(FIELD_BYTES)
    if raw is None:
        raise DecodeError(f"stream entry has no {FIELD!r} field (fields: {sorted(map(repr, fields))})")
    return decode(raw)


def _upgrade(event_type: str, version: int, data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    while (event_type, version) in UPGRADERS:
        data = UPGRADERS[(event_type, version)](data)
        version += 1
    return version, data

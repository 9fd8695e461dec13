"""Pure encode/decode between `Event` and the bytes stored in one stream-entry field.

Two forms, both one JSON object:
- the stored form (`encode`), compact because a lab keeps millions of events in Redis memory:
  short keys; no `run` (the stream key names it; the id's producer says `$r` for it, and `$`
  cannot occur in a producer name); no `seq` (the id ends with it); no host when the producer
  starts with it (`host/...`, as the agent's do); no type when it is `metric`; `d` only when
  there is data and `v` only when it is not 1. Events whose id is not `producer:seq` are
  stored in the full form;
- the full form (`encode_full`), self-contained, for files that leave Redis (the agent's spool).
`decode` reads both (the full form is also what stores written before the compact form hold).

Metric values may be NaN or +/-Inf (that is what the product watches for), so the JSON is
Python's dialect: `NaN`, `Infinity` and `-Infinity` are written bare.

Whatever an entry holds (bytes that are not UTF-8, JSON nested thousands deep, a 5,000-digit seq,
an upgrader that trips), `decode` raises DecodeError and nothing else: every reader turns that into
a dead letter or an "undecodable" line and goes on. It also refuses what would mislead a policy:
a non-finite `ts`, and `metric` data that is not numbers, a `step` that is not a whole number
>= 0, or an Inf that is an overflowing numeral (`1e400`) rather than a written `Infinity`.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from trainwarden.core.jsonload import overflows, too_deep
from trainwarden.core.limits import (
    MAX_ENTRY_CHARS,
    MAX_ID_CHARS,
    MAX_POLICY_ENTRY_CHARS,
    envelope_problem,
    size_problem,
)
from trainwarden.core.metrics import data_problem, plainly_valid
from trainwarden.events.envelope import ENVELOPE_VERSION, Event
from trainwarden.events.errors import DecodeError
from trainwarden.events.types import POLICY_LOADED

FIELD = "e"
FIELD_BYTES = b"e"

_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=True, ensure_ascii=False)
# the C encoder made once: `JSONEncoder.encode` builds one (and a float formatter) per call, which costs more than
# encoding an agent's metric event; no circular-reference check (events hold JSON values only)
_C_ENCODE = (
    c_make_encoder(None, _ENCODER.default, encode_basestring, None, ":", ",", False, False, True)
    if c_make_encoder is not None
    else None
)


def _dumps(obj: Any) -> str:
    return "".join(_C_ENCODE(obj, 0)) if _C_ENCODE is not None else _ENCODER.encode(obj)


_DECODER = json.JSONDecoder()  # accepts NaN/Infinity like json.loads, without its per-call checks


def _loads(text: str) -> Any:
    """`json.loads` for what we write (no surrounding whitespace), skipping its two whitespace scans;
    anything else takes the full path, which also says what is wrong."""
    try:
        obj, end = _DECODER.raw_decode(text)
    except ValueError:
        return _DECODER.decode(text)
    if end != len(text):
        return _DECODER.decode(text)
    return obj


MAX_TS = 1e11  # seconds: year 5138, inside what datetime can show; NaN, Inf and 1e400 are not times
MAX_DEPTH = 32  # nesting levels an entry may have (ours have a handful): deeper is refused before parsing
PLAIN_METRIC_CHARS = 2048  # a metric entry longer than this gets the close look (names too: core/limits.py)
DEFAULT_TYPE = "metric"  # by far the most frequent type: the stored form leaves it out

# (type, version) -> function turning that version's data into the next version's data.
Upgrader = Callable[[dict[str, Any]], dict[str, Any]]
UPGRADERS: dict[tuple[str, int], Upgrader] = {}


def encode(event: Event) -> bytes:
    """The stored form: compact; decoding it needs the run (the stream it was read from)."""
    producer, _, seq = event.id.rpartition(":")
    if "$" in producer or seq != str(event.seq):  # not an id make_event builds: keep every field
        return encode_full(event)
    short, own_host = _short(event.run, producer, event.host)
    obj: dict[str, Any] = {"i": f"{short}:{seq}"}
    if not own_host:
        obj["h"] = event.host
    if event.type != DEFAULT_TYPE:
        obj["t"] = event.type
    obj["s"] = event.ts
    if event.data:
        obj["d"] = event.data
    if event.v != 1:
        obj["v"] = event.v
    return _dumps(obj).encode()


@functools.lru_cache(maxsize=4096)
def _short(run: str, producer: str, host: str) -> tuple[str, bool]:
    """The producer with `$r` for the run, and whether it starts with the host (then the host is left out). A
    producer makes many events: worked out once per (run, producer, host)."""
    short = producer.replace(run, "$r")
    return short, "/" not in host and short.startswith(host + "/")


def encode_full(event: Event) -> bytes:
    """The self-contained form: every envelope field under its own name."""
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


def decode(raw: bytes | str, run: str | None = None) -> Event:
    """Parse and validate one event in either form; raises DecodeError saying what is wrong, and nothing else.

    `run` is the run whose stream the entry came from; the compact form needs it.
    """
    try:
        text = raw.decode() if isinstance(raw, bytes) else raw  # we always write UTF-8
        if len(text) > MAX_ENTRY_CHARS and (problem := size_problem(len(text), limit=MAX_POLICY_ENTRY_CHARS)):
            raise DecodeError(f"too large: {problem}")  # refused before parsing
        if text.count("[") + text.count("{") > MAX_DEPTH and too_deep(text, MAX_DEPTH):  # counts: the fast path
            raise DecodeError(f"not valid JSON: nested deeper than {MAX_DEPTH} levels")
        try:
            obj = _loads(text)
        except ValueError as exc:
            raise DecodeError(f"not valid JSON: {exc}") from None
        if type(obj) is not dict:
            raise DecodeError(f"expected a JSON object, got {type(obj).__name__}")
        event = _decode_compact(obj, run) if "i" in obj else _decode_full(obj)
        if run is not None and event.run != run:  # a full-form entry may name any run: it is not this run's
            raise DecodeError(f"the entry names run {event.run!r:.80} but is in the stream of run {run!r}",
                              event_id=event.id)  # fmt: skip
        if (problem := envelope_problem(event.id, event.type, event.host)) is not None:
            raise DecodeError(f"too large: {problem}", event_id=event.id[:MAX_ID_CHARS])
        if len(text) > MAX_ENTRY_CHARS and event.type != POLICY_LOADED:
            raise DecodeError(f"too large: {size_problem(len(text))} (only policy.loaded may be larger)",
                              event_id=event.id)  # fmt: skip
        if event.type == DEFAULT_TYPE:
            if len(text) > PLAIN_METRIC_CHARS or not plainly_valid(event.data):
                _check_metric(event, text)
        else:
            _check_payload(event)
        return event
    except DecodeError:
        raise
    except UnicodeDecodeError as exc:
        raise DecodeError(f"not valid JSON: {exc}") from None
    except Exception as exc:  # RecursionError, MemoryError, an upgrader's bug: the entry is unreadable all the same
        raise DecodeError(f"cannot be decoded: {type(exc).__name__}: {exc}") from None


def _check_metric(event: Event, text: str) -> None:
    """Metric data off the fast path: say what is wrong, or tell a written Inf from an overflowing numeral."""
    problem = data_problem(event.data)
    if problem is None and overflows(text):  # only entries holding a NaN/Inf (or very large values) parse again
        problem = "a number is out of range (a numeral too large for a float, not a written Infinity)"
    if problem is not None:
        raise DecodeError(f"invalid metric data: {problem}", event_id=event.id)


def _check_payload(event: Event) -> None:
    """An event of any other type: its data is what its type declares (events/catalogue.py: a session that
    is a string, a reason that is text), or it drives nothing: not a projection, a stop target or a message."""
    from trainwarden.events import catalogue  # here: `python -m trainwarden.events.catalogue` writes the docs

    found = catalogue.problems(event.type, event.data, missing=False)
    if found:
        raise DecodeError(f"invalid {event.type} data: " + "; ".join(found)[:500], event_id=event.id)


def _decode_compact(obj: dict[str, Any], run: str | None) -> Event:
    """The hot path of every read: checks inlined, positional construction."""
    short_id = obj["i"]
    if run is None:
        raise DecodeError("a stored (compact) event needs its run to be decoded", event_id=short_id)
    if type(short_id) is not str:
        raise DecodeError("i must be a string", event_id=short_id)
    _, sep, seq_text = short_id.rpartition(":")
    if not sep or not seq_text.isdigit() or not seq_text.isascii():
        raise DecodeError(f"id {short_id!r} does not end with ':<seq>'", event_id=short_id)
    host = obj["h"] if "h" in obj else short_id.partition("/")[0]  # the short form starts with it
    event_type = obj.get("t", DEFAULT_TYPE)
    if type(event_type) is not str or type(host) is not str:
        raise DecodeError("t and h must be strings", event_id=short_id)
    ts = obj.get("s")
    if (type(ts) is not float and type(ts) is not int) or not -MAX_TS < ts < MAX_TS:  # NaN fails too
        raise DecodeError(f"ts ('s') must be a number (a unix time), got {ts!r:.40}", event_id=short_id)
    data = obj.get("d", {})
    if type(data) is not dict:
        raise DecodeError(f"data must be an object, got {type(data).__name__}", event_id=short_id)
    version = obj.get("v", 1)
    if type(version) is not int or version < 1:
        raise DecodeError("v must be an integer >= 1", event_id=short_id)
    if UPGRADERS or version < ENVELOPE_VERSION:
        version, data = _upgrade(event_type, version, data)
    event_id = short_id.replace("$r", run) if "$r" in short_id else short_id
    return Event(event_id, event_type, run, host, ts, int(seq_text), data, version)


def _decode_full(obj: dict[str, Any]) -> Event:
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
    if type(seq) is not int:
        raise DecodeError("seq and v must be integers (v >= 1)", event_id=event_id)
    if not event_id.endswith(f":{seq}"):
        raise DecodeError(f"id {event_id!r} does not end with its seq {seq}", event_id=event_id)
    return _checked(event_id, event_type=event_type, run=run, host=host, ts=ts, seq=seq, data=data, version=version)


def _checked(
    event_id: str, *, event_type: str, run: str, host: str, ts: Any, seq: int, data: Any, version: Any
) -> Event:
    if type(version) is not int or version < 1:
        raise DecodeError("seq and v must be integers (v >= 1)", event_id=event_id)
    if (type(ts) is not float and type(ts) is not int) or not -MAX_TS < ts < MAX_TS:  # NaN fails too
        raise DecodeError(f"ts must be a number (a unix time), got {ts!r:.40}", event_id=event_id)
    if type(data) is not dict:
        raise DecodeError(f"data must be an object, got {type(data).__name__}", event_id=event_id)
    if version < ENVELOPE_VERSION or (event_type, version) in UPGRADERS:
        version, data = _upgrade(event_type, version, data)
    return Event(id=event_id, type=event_type, run=run, host=host, ts=ts, seq=seq, data=data, v=version)


def decode_fields(fields: Mapping[bytes, bytes], run: str | None = None) -> Event:
    """Decode a stream entry's field map as returned by redis-py (bytes keys)."""
    raw = fields.get(FIELD_BYTES)
    if raw is None:
        raise DecodeError(f"stream entry has no {FIELD!r} field (fields: {sorted(map(repr, fields))})")
    return decode(raw, run)


def _upgrade(event_type: str, version: int, data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    while (event_type, version) in UPGRADERS:
        data = UPGRADERS[(event_type, version)](data)
        version += 1
    return version, data


def json_safe(value: Any) -> Any:
    """Strict JSON for files people open with other tools: NaN/Inf become the strings 'nan'/'inf'/'-inf'."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value

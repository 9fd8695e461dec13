"""The archive file format, as pure functions: one JSON object per line (gzip-compressed on disk).

A file holds one run's entries, a header first and a footer last:

    {"archive":"trainwarden","format":1,"run":"exp01"}
    {"stream_id":"1796233170110-0","id":"gpu1/log/exp01/g0:6400","type":"metric","v":1,"run":"exp01",
     "host":"gpu1","ts":1796233170.11,"seq":6400,"data":{"step":25,"loss":NaN}}
    {"stream_id":"1796233170111-0","malformed":"not valid JSON: ...","fields":[["e","{oops"]]}
    {"end":true,"count":2,"first":"1796233170110-0","last":"1796233170111-0"}

Why its own format rather than the stored bytes: the stored form (events/codec.py) is free to
change (a compact form for Redis memory), while an archive is read much later, by people and by
other tools. So a line is the whole envelope under its long names, plus the stream id the entry
had (replay resumes the stream after the last one). Values keep Python's JSON dialect (bare
`NaN`, `Infinity`), as in the store, so a NaN loss replays as NaN. An entry that could not be
decoded is kept as it was stored (its raw fields), never dropped. The footer makes a file that
was cut short detectable even where gzip's own check cannot tell.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

from trainwarden.archive.errors import ArchiveFormatError, ArchiveLineError
from trainwarden.core.jsonload import loads
from trainwarden.events.codec import UPGRADERS
from trainwarden.events.envelope import ENVELOPE_VERSION, Event
from trainwarden.events.sids import is_sid, sid_key
from trainwarden.events.store import Malformed

FORMAT = 1
MAGIC = "trainwarden"
SUFFIX = ".jsonl.gz"
ENVELOPE_FIELDS = ("id", "type", "v", "run", "host", "ts", "seq", "data")

Entry = tuple[str, Event | Malformed]

_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=True, ensure_ascii=False).encode
_loads = loads  # bounded nesting; only ValueError (a tampered or torn archive line is an ArchiveFormatError)


@dataclass(frozen=True, slots=True)
class Header:
    run: str
    format: int = FORMAT


@dataclass(frozen=True, slots=True)
class Footer:
    count: int
    first: str | None
    last: str | None


# -- encoding ---------------------------------------------------------------------------------------


def encode_header(header: Header) -> bytes:
    return _line({"archive": MAGIC, "format": header.format, "run": header.run})


def encode_line(sid: str, item: Event | Malformed) -> bytes:
    """One entry as one line (ending in a newline)."""
    if isinstance(item, Malformed):
        fields = [[_bytes_out(k), _bytes_out(v)] for k, v in item.fields.items()]
        return _line({"stream_id": sid, "malformed": item.reason, "fields": fields})
    return _line({"stream_id": sid, "id": item.id, "type": item.type, "v": item.v, "run": item.run,
                  "host": item.host, "ts": item.ts, "seq": item.seq, "data": item.data})  # fmt: skip


def encode_footer(footer: Footer) -> bytes:
    return _line({"end": True, "count": footer.count, "first": footer.first, "last": footer.last})


def archive_name(first: str, last: str) -> str:
    """The file name for entries `first`..`last`: deterministic, so a redone archive lands on the same file."""
    return f"{first}_{last}{SUFFIX}"


def parse_archive_name(name: str) -> tuple[str, str] | None:
    """`archive_name`'s inverse; None for a name trainwarden did not give."""
    if not name.endswith(SUFFIX):
        return None
    first, sep, last = name[: -len(SUFFIX)].partition("_")
    if not sep or not is_sid(first) or not is_sid(last):
        return None
    return first, last


def _line(obj: dict[str, Any]) -> bytes:
    return _dumps(obj).encode() + b"\n"


def _bytes_out(raw: bytes) -> str | dict[str, str]:
    """Raw stream bytes as JSON: text when they are UTF-8, else {"base64": ...}."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def _bytes_in(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dict) and isinstance(value.get("base64"), str):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except ValueError as exc:
            raise ArchiveLineError(f"bad base64 in a malformed entry's fields: {exc}") from None
    raise ArchiveLineError(f"a malformed entry's field must be a string or {{'base64': ...}}, got {value!r}")


# -- decoding ---------------------------------------------------------------------------------------


def decode_line(raw: bytes | str, *, line: int = 1, source: str = "archive") -> Entry:
    """One entry line -> (stream id, Event or Malformed); ArchiveFormatError names source:line."""
    item = decode_any(raw, line=line, source=source)
    if not isinstance(item, tuple):
        raise ArchiveFormatError(f"{source}:{line}: expected an entry line, got the {type(item).__name__.lower()}")
    return item


def decode_any(raw: bytes | str, *, line: int = 1, source: str = "archive") -> Header | Footer | Entry:
    try:
        return _decode(raw)
    except ArchiveLineError as exc:
        raise ArchiveFormatError(f"{source}:{line}: {exc}") from None


def _decode(raw: bytes | str) -> Header | Footer | Entry:
    try:
        obj = _loads(raw.decode() if isinstance(raw, bytes) else raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ArchiveLineError(f"not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ArchiveLineError(f"expected a JSON object, got {type(obj).__name__}")
    if "archive" in obj:
        if obj["archive"] != MAGIC or not isinstance(obj.get("run"), str):
            raise ArchiveLineError("not a trainwarden archive header")
        if obj.get("format") != FORMAT:
            raise ArchiveLineError(
                f"archive format {obj.get('format')!r} is not supported (this trainwarden reads {FORMAT})"
            )
        return Header(run=obj["run"], format=FORMAT)
    if "end" in obj:
        count, first, last = obj.get("count"), obj.get("first"), obj.get("last")
        if type(count) is not int or not all(x is None or (isinstance(x, str) and is_sid(x)) for x in (first, last)):
            raise ArchiveLineError("the footer needs an integer count and stream ids first and last")
        return Footer(count=count, first=first, last=last)
    sid = obj.get("stream_id")
    if not isinstance(sid, str) or not is_sid(sid):
        raise ArchiveLineError(f"missing or invalid 'stream_id' (got {sid!r}; expected an id like 1796233170110-0)")
    if "malformed" in obj:
        fields = obj.get("fields")
        if not isinstance(obj["malformed"], str) or not isinstance(fields, list):
            raise ArchiveLineError("a malformed entry needs a 'malformed' reason and a 'fields' list")
        pairs: dict[bytes, bytes] = {}
        for pair in fields:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ArchiveLineError(f"a malformed entry's fields are [name, value] pairs, got {pair!r}")
            pairs[_bytes_in(pair[0])] = _bytes_in(pair[1])
        return sid, Malformed(sid=sid, reason=obj["malformed"], fields=pairs)
    return sid, _event(obj)


def _event(obj: dict[str, Any]) -> Event:
    missing = [name for name in ENVELOPE_FIELDS if name not in obj]
    if missing:
        raise ArchiveLineError(f"missing envelope field {missing[0]!r}")
    event_id, event_type, version, run, host, ts, seq, data = (obj[name] for name in ENVELOPE_FIELDS)
    if not all(isinstance(x, str) for x in (event_id, event_type, run, host)):
        raise ArchiveLineError("id, type, run and host must be strings")
    if type(seq) is not int or type(version) is not int or version < 1:
        raise ArchiveLineError("seq and v must be integers (v >= 1)")
    if type(ts) not in (int, float):
        raise ArchiveLineError(f"ts must be a number, got {type(ts).__name__}")
    if not isinstance(data, dict):
        raise ArchiveLineError(f"data must be an object, got {type(data).__name__}")
    if not event_id.endswith(f":{seq}"):
        raise ArchiveLineError(f"id {event_id!r} does not end with its seq {seq}")
    while (event_type, version) in UPGRADERS:  # an archive read by a newer trainwarden
        data = UPGRADERS[(event_type, version)](data)
        version += 1
    if version < ENVELOPE_VERSION:
        raise ArchiveLineError(f"version {version} of {event_type!r} has no upgrader to version {ENVELOPE_VERSION}")
    return Event(id=event_id, type=event_type, run=run, host=host, ts=ts, seq=seq, data=data, v=version)


class ArchiveParser:
    """Checks a whole file line by line: header first, entries of the header's run in strictly rising
    stream order, then a footer whose count and ids match, and nothing after it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.line = 0
        self.header: Header | None = None
        self.footer: Footer | None = None
        self.count = 0
        self.first: str | None = None
        self.last: str | None = None

    def feed(self, raw: bytes) -> Entry | None:
        """The next line; returns its entry, None for the header and the footer."""
        self.line += 1
        if self.footer is not None:
            self._fail("text after the footer")
        if self.header is None:
            self.header = self._header(raw)
            return None
        item = decode_any(raw, line=self.line, source=self.source)
        if isinstance(item, Header):
            self._fail("a second header")
        if isinstance(item, Footer):
            if (item.count, item.first, item.last) != (self.count, self.first, self.last):
                self._fail(f"the footer says {item.count} entries {item.first}..{item.last}, the file holds "
                           f"{self.count} entries {self.first}..{self.last}")  # fmt: skip
            self.footer = item
            return None
        sid, entry = item
        if self.last is not None and sid_key(sid) <= sid_key(self.last):
            self._fail(f"stream id {sid} is not after the previous line's {self.last}")
        if isinstance(entry, Event) and entry.run != self.header.run:
            self._fail(f"an event of run {entry.run!r} in an archive of run {self.header.run!r}")
        self.count += 1
        self.first = self.first or sid
        self.last = sid
        return item

    def finish(self) -> Footer:
        """After the last line: the footer, or an error saying the file is incomplete."""
        if self.header is None:
            raise ArchiveFormatError(f"{self.source}: empty file, not an archive")
        if self.footer is None:
            raise ArchiveFormatError(f"{self.source}:{self.line}: the file ends without its footer line: it was cut "
                                     "short (an archive interrupted while being written?)")  # fmt: skip
        return self.footer

    def _header(self, raw: bytes) -> Header:
        try:
            item = _decode(raw)
        except ArchiveLineError as exc:
            self._fail(f"{exc} (is this a trainwarden archive?)")
        if not isinstance(item, Header):
            self._fail('not a trainwarden archive: the first line must be its header {"archive":"trainwarden",...}')
        return item

    def _fail(self, problem: str) -> NoReturn:
        raise ArchiveFormatError(f"{self.source}:{self.line}: {problem}")


def parse_lines(lines: Iterable[bytes], *, source: str = "archive") -> Iterator[Entry]:
    """Every entry of a whole file's lines, checked as ArchiveParser does."""
    parser = ArchiveParser(source)
    for raw in lines:
        entry = parser.feed(raw)
        if entry is not None:
            yield entry
    parser.finish()

"""Where a run's archived head went: one hash per run (`tw:{run}:archive`), file name -> record.

The record is written by the same script that trims the stream (`commit_archive`), so "recorded"
and "trimmed" are one fact: an archive file without a record holds entries that are still in the
stream, and may be thrown away; one with a record may be the only copy of its entries.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

import redis
from trainwarden.archive.errors import ArchiveConflict
from trainwarden.events.errors import DecodeError
from trainwarden.events.keys import Keys
from trainwarden.events.redis_types import Client
from trainwarden.events.sids import sid_key, sid_successor
from trainwarden.events.store import redis_errors

# KEYS: log, archive, lease.  ARGV: first, last, minid (the id after last), file name, record JSON,
# lease holder. Trims only while the archive's lease holds, and only if the stream still starts at
# `first` and still holds `last`: then the entries it removes (every id below minid) are exactly
# those the archive holds. Reply: {trimmed, ''}, or {-1, the stream's first id} when the head
# moved, {-2, ''} when `last` is gone, {-3, holder} when the lease is not this archive's.
COMMIT_LUA = """
local holder = redis.call('GET', KEYS[3])
if holder ~= ARGV[6] then return {-3, holder or ''} end
local head = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if #head == 0 or head[1][1] ~= ARGV[1] then
  return {-1, head[1] and head[1][1] or ''}
end
if #redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2]) == 0 then return {-2, ''} end
local trimmed = redis.call('XTRIM', KEYS[1], 'MINID', ARGV[3])
redis.call('HSET', KEYS[2], ARGV[4], ARGV[5])
return {trimmed, ''}
"""
COMMIT_SHA = hashlib.sha1(COMMIT_LUA.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ArchiveRecord:
    """One archive file: which entries it holds, where it was written, and how to check it."""

    name: str  # the file name (trainwarden.archive.format.archive_name)
    path: str  # absolute path on the host that wrote it
    host: str
    first: str
    last: str
    count: int
    malformed: int
    size: int
    sha256: str
    archived_at: float

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: bytes | str) -> ArchiveRecord:
        try:
            obj: dict[str, Any] = json.loads(raw)
            return cls(**obj)
        except (ValueError, TypeError) as exc:
            raise DecodeError(f"unreadable archive record: {exc}") from None


def read_records(client: Client, keys: Keys, run: str) -> list[ArchiveRecord]:
    """The run's archive records, oldest entries first."""
    with redis_errors("read a run's archive records", run=run):
        raw = client.hvals(keys.archive(run))
    return sorted((ArchiveRecord.from_json(v) for v in raw), key=lambda r: sid_key(r.first))


def commit_archive(client: Client, keys: Keys, run: str, record: ArchiveRecord, *, lease: str) -> int:
    """Trim the stream up to `record.last` (exactly: XTRIM MINID, not `~`) and record the file, atomically.

    Returns how many entries were trimmed; raises ArchiveConflict when the stream no longer starts
    at `record.first` (another archive committed meanwhile) or `lease` no longer holds the run's archive
    lease (workers/archive_lease.py): nothing is trimmed then.
    """
    args = [keys.log(run), keys.archive(run), keys.archiving(run), record.first, record.last,
            sid_successor(record.last), record.name, record.to_json(), lease]  # fmt: skip
    with redis_errors("trim the archived head of a run's log", run=run):
        try:
            reply = client.evalsha(COMMIT_SHA, 3, *args)
        except redis.exceptions.NoScriptError:
            reply = client.eval(COMMIT_LUA, 3, *args)
    trimmed, head = int(reply[0]), reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
    if trimmed == -1:
        raise ArchiveConflict(
            f"the log of {run!r} now starts at {head or 'nothing'}, not at {record.first}: another archive of it "
            "committed meanwhile; nothing was trimmed, run the archive again",
            run=run,
        )
    if trimmed == -3:
        raise ArchiveConflict(
            f"the archive lease of {run!r} is held by {head or 'nobody'} now, not by this archive (it stalled past "
            "its lease); nothing was trimmed, run the archive again",
            run=run,
        )
    if trimmed == -2:
        raise ArchiveConflict(f"entry {record.last} of {run!r} is no longer in its log; nothing was trimmed", run=run)
    return trimmed

"""The archive's state in Redis: each run's archive records, the lease that lets one archive run at a time,
the trim that commits an archive, and what the archive reads to know how far it may go.

The archive package keeps the meaning (records as dataclasses, conflicts as its errors); this module only
stores and fetches. The trim and the record are one script (`commit_trim`): "recorded" and "trimmed" are one
fact, checked against the lease so that an archive stalled past it trims nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import cast

import redis
from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client, bytes_value, hash_fields, stream_entries
from trainwarden.events.store import next_id

PAGE = 1000

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

# KEYS: lease.  ARGV: expected holder, new holder ('' to delete), ttl ms. Compare-and-set.
CAS_LUA = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1
"""


def record_values(client: Client, keys: Keys, run: str) -> list[bytes]:
    """The run's archive records as stored (JSON), in no order."""
    with redis_errors("read a run's archive records", run=run):
        return cast(list[bytes], client.hvals(keys.archive(run)))


def commit_trim(client: Client, keys: Keys, run: str, *, first: str, last: str, minid: str, name: str,
                record: str, lease: str) -> tuple[int, str]:  # fmt: skip
    """Run the commit script (see COMMIT_LUA): (entries trimmed, '') or (a negative code, its detail)."""
    args = [keys.log(run), keys.archive(run), keys.archiving(run), first, last, minid, name, record, lease]
    with redis_errors("trim the archived head of a run's log", run=run):
        try:
            reply = client.evalsha(COMMIT_SHA, 3, *args)
        except redis.exceptions.NoScriptError:
            reply = client.eval(COMMIT_LUA, 3, *args)
    return int(reply[0]), reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])


def lease_take(client: Client, key: str, owner: str, *, ttl_ms: int, run: str) -> bool:
    """Take the archive lease `key` if nobody holds it."""
    with redis_errors("take the archive lease", run=run):
        return bool(client.set(key, owner, nx=True, px=ttl_ms))


def lease_holder(client: Client, key: str, *, run: str) -> str:
    """Who holds the archive lease ('' for nobody)."""
    with redis_errors("take the archive lease", run=run):
        raw = bytes_value(client.get(key))
    return raw.decode() if raw else ""


def lease_swap(client: Client, key: str, expected: str, new: str, *, ttl_ms: int, what: str, run: str) -> bool:
    """Compare-and-set the lease: from `expected` to `new` ('' releases it); whether it was `expected`'s."""
    with redis_errors(what, run=run):
        return bool(client.eval(CAS_LUA, 1, key, expected, new, ttl_ms))


def checkpoint_hashes(client: Client, keys: Keys, run: str) -> tuple[dict[bytes, bytes], dict[bytes, bytes]]:
    """The run's workers' and notifier's checkpoint hashes ({} for none): how far each has read."""
    with redis_errors("read a run's checkpoints", run=run):
        return hash_fields(client.hgetall(keys.cursor(run))), hash_fields(client.hgetall(keys.notify(run)))


def unfinished_feed_entries(client: Client, keys: Keys) -> Iterator[tuple[str, str, dict[bytes, bytes], str]]:
    """(group, feed id, fields, state) of every feed entry some consumer group has not finished: delivered but
    not acknowledged, or not delivered yet. None before the feed exists."""
    feed = keys.feed()
    with redis_errors("read the feed's consumer groups"):
        try:
            groups = client.xinfo_groups(feed)
        except redis.ResponseError:  # no feed yet
            return
        for info in groups:
            group = _text(info["name"])
            start = "-"
            while True:  # delivered, not acknowledged
                pending = client.xpending_range(feed, group, min=start, max="+", count=PAGE)
                for p in pending:
                    fid = _text(p["message_id"])
                    for got, fields in stream_entries(client.xrange(feed, min=fid, max=fid)):
                        yield group, _text(got), fields, "not acknowledged"
                if len(pending) < PAGE:
                    break
                start = next_id(_text(pending[-1]["message_id"]))
            start = next_id(_text(info["last-delivered-id"]))
            while True:  # not delivered yet
                entries = stream_entries(client.xrange(feed, min=start, max="+", count=PAGE))
                for raw_fid, fields in entries:
                    yield group, _text(raw_fid), fields, "not read yet"
                if len(entries) < PAGE:
                    break
                start = next_id(_text(entries[-1][0]))


def _text(value: object) -> str:
    """A field of XINFO GROUPS or XPENDING: bytes from our clients, typed loosely by redis-py."""
    return value.decode() if isinstance(value, bytes) else str(value)

"""The Redis side of a batched job turn (workers/batch.py): many runs' locks and reads in one command each.

At 1,000 runs x 1 Hz a job sees about one event per run, so what a run's turn costs is what an event
costs, and a turn of its own was ~8 round trips, each ~0.1 ms of redis-py CPU. Here all runs of a
job share each step: one script clears their `queued` and `fast` flags and takes their locks, one script reads
their checkpoints and the log entries after them, one script releases the locks. One Redis only: on
a cluster the keys of several runs live on different slots (the per-run path serves it).

The locks are redis-py `Lock`s as workers/process.py takes them (the key holds a token, released
only by its holder), so a batched turn and a per-run turn exclude each other.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.client import Pipeline
from trainwarden.events.envelope import Event
from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client
from trainwarden.events.store import Malformed, decode_entries

# KEYS: the `queued` and `fast` flags and the lock of each run, in threes; ARGV: lock ms, then a token per run.
# Reply: 1 where the lock was taken, 0 where another turn holds it.
_LOCK_LUA = """
local out = {}
for i = 1, #KEYS / 3 do
  redis.call('DEL', KEYS[3 * i - 2], KEYS[3 * i - 1])
  out[i] = redis.call('SET', KEYS[3 * i], ARGV[i + 1], 'NX', 'PX', ARGV[1]) and 1 or 0
end
return out
"""
# KEYS: the locks; ARGV: their tokens. A lock that expired and was taken by another turn is left alone.
_RELEASE_LUA = """
local released = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i] then redis.call('DEL', KEYS[i]); released = released + 1 end
end
return released
"""
# KEYS: cursor and log of each run, pairwise; ARGV: page size, then per run the checkpoint version the
# caller holds ('' for none). Reply per run: the checkpoint hash as a flat field/value list, or 0 where
# the stored one is the version held (and has no pending actions: a write of those alone keeps the
# version), and the log entries strictly after its `after` (XRANGE with '(').
_READ_LUA = """
local out = {}
for i = 1, #KEYS / 2 do
  local meta = redis.call('HMGET', KEYS[2 * i - 1], 'v', 'after', 'pending')
  local start = '-'
  if meta[2] and meta[2] ~= '' then start = '(' .. meta[2] end
  local cp = 0
  if ARGV[i + 1] == '' or meta[1] ~= ARGV[i + 1] or meta[3] ~= '[]' then
    cp = redis.call('HGETALL', KEYS[2 * i - 1])
  end
  out[i] = {cp, redis.call('XRANGE', KEYS[2 * i], start, '+', 'COUNT', ARGV[1])}
end
return out
"""


@dataclass(frozen=True, slots=True)
class RunRead:
    """One run's checkpoint hash and the log entries after it, as read under the turn's WATCH."""

    fields: dict[bytes, bytes] | None  # None: the stored checkpoint is the version the caller holds
    entries: list[tuple[str, Event | Malformed]]  # oldest first


def lock_runs(client: Client, keys: Keys, runs: Sequence[str], *, lock_ms: int) -> dict[str, str]:
    """Clear the runs' `queued` and `fast` flags and take every free run lock; returns run -> token of those taken.

    The flags go before the read, as in the per-run turn: events whose feed entries found one set are
    read by this turn (a fast job of several runs takes this turn too: a `fast` flag left set would have
    the dispatcher acknowledge a later urgent entry as covered by a job that has already read)."""
    if not runs:
        return {}
    tokens = [uuid.uuid4().hex for _ in runs]
    names = [name for run in runs for name in (keys.queued(run), keys.fast(run), keys.lock(run))]
    with redis_errors("lock runs"):
        taken = client.eval(_LOCK_LUA, len(names), *names, lock_ms, *tokens)
    return {run: token for run, token, ok in zip(runs, tokens, taken, strict=True) if ok}


def release_runs(client: Client, keys: Keys, tokens: dict[str, str]) -> int:
    """Release the locks `lock_runs` took (those still held with their token); returns how many."""
    if not tokens:
        return 0
    with redis_errors("release run locks"):
        return int(client.eval(_RELEASE_LUA, len(tokens), *[keys.lock(r) for r in tokens], *tokens.values()))


def queue_release(pipe: Pipeline, keys: Keys, tokens: dict[str, str]) -> None:
    """`release_runs` queued in a transaction (the turn's commit): the locks go with the EXEC, one round trip less;
    a commit that fails runs nothing queued, and the caller releases them with `release_runs`."""
    if tokens:
        pipe.eval(_RELEASE_LUA, len(tokens), *[keys.lock(r) for r in tokens], *tokens.values())


def read_runs(
    client: Client, keys: Keys, runs: Sequence[str], *, page: int, held: Sequence[str] = ()
) -> dict[str, RunRead]:
    """Each run's checkpoint and up to `page` log entries after it, in one round trip; `held`: per run, the
    version of the checkpoint the caller holds ('' for none), not sent again while it is the stored one."""
    if not runs:
        return {}
    names = [name for run in runs for name in (keys.cursor(run), keys.log(run))]
    versions = list(held) or [""] * len(runs)
    with redis_errors("read runs' checkpoints and logs"):
        replies = client.eval(_READ_LUA, len(names), *names, page, *versions)
    return {run: parse_run_read(run, reply) for run, reply in zip(runs, replies, strict=True)}


def parse_run_read(run: str, reply: Sequence[Any]) -> RunRead:
    """Pure: one run's part of the read script's reply -> its checkpoint fields and decoded entries."""
    flat, raw_entries = reply
    fields = None if isinstance(flat, int) else dict(zip(flat[::2], flat[1::2], strict=True))
    entries = [(sid, dict(zip(kv[::2], kv[1::2], strict=True))) for sid, kv in raw_entries]
    return RunRead(fields=fields, entries=decode_entries(entries, run))

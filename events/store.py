"""The event log on Redis Streams: a thin wrapper, one script for appends, pure parsers around it.

Layout (see events/keys.py): one stream per run holding the encoded events, a hash of producer
high-water marks per run, one shared feed stream that says "run R got entries F..L of types T"
(what the dispatcher and the notifier consume through consumer groups), and a sorted set of runs.
On a Redis Cluster the script touches only the run's slot and leaves the feed and runs writes in
the run's outbox, carried out right after (events/outbox.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from redis.client import Pipeline
from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError
from trainwarden.events import history
from trainwarden.events.codec import FIELD_BYTES, decode, encode
from trainwarden.events.envelope import Event
from trainwarden.events.errors import DecodeError
from trainwarden.events.keys import Keys
from trainwarden.events.outbox import Outbox, encode_item, new_nonce
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client, Entry, scored_members, stream_entries
from trainwarden.events.urgency import urgency_marks

# KEYS: log, hwm, then feed and runs (one Redis) or outbox (cluster).
# ARGV: run, last_ts, then the batch as four newline-joined lists: producers, seqs, types,
# payloads (none can hold a raw newline: producers and types are validated, seqs are digits,
# and JSON escapes newlines), 'ids' or 'count': the reply is the stream id of each event (0 for
# a duplicate), or only how many were stored, and the urgency marks: one '1' or '0' per event
# (events/urgency.py), '' for none. A feed entry that stored an urgent event gets `u=1`, the
# dispatcher's cue for the fast lane (two bytes, on the rare entry that has it). Seven arguments
# per batch instead of four per event, and a one-number reply for the agent, keep redis-py's
# packing and parsing cheap.
# A seq is stored only if it is above the producer's high-water mark; seqs are compared as
# decimal strings (length first) because Lua numbers are doubles and lose precision past 2^53.
_APPEND_BODY = """
local function above(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local function split(s)
  local parts, pos = {}, 1
  while true do
    local nl = string.find(s, '\\n', pos, true)
    if not nl then parts[#parts + 1] = string.sub(s, pos); return parts end
    parts[#parts + 1] = string.sub(s, pos, nl - 1)
    pos = nl + 1
  end
end
local producers, seqs, kinds, payloads = split(ARGV[3]), split(ARGV[4]), split(ARGV[5]), split(ARGV[6])
local marks, changed, out, types, seen = {}, {}, {}, {}, {}
local first, last, stored, urgent = nil, nil, 0, false
for i = 1, #producers do
  local producer, seq = producers[i], seqs[i]
  local mark = marks[producer]
  if mark == nil then
    mark = redis.call('HGET', KEYS[2], producer) or ''
  end
  if mark == '' or above(seq, mark) then
    local sid = redis.call('XADD', KEYS[1], '*', 'e', payloads[i])
    marks[producer] = seq
    changed[producer] = true
    if first == nil then first = sid end
    last = sid
    local t = kinds[i]
    if not seen[t] then seen[t] = true; types[#types + 1] = t end
    out[#out + 1] = sid
    stored = stored + 1
    if string.sub(ARGV[8], i, i) == '1' then urgent = true end
  else
    marks[producer] = mark
    out[#out + 1] = 0
  end
end
for producer, _ in pairs(changed) do
  redis.call('HSET', KEYS[2], producer, marks[producer])
end
if first ~= nil then
  table.sort(types)
  local entry = {'r', ARGV[1], 'f', first, 'l', last, 't', table.concat(types, ',')}
  if urgent then entry[#entry + 1] = 'u'; entry[#entry + 1] = '1' end
  SHARED_WRITES
end
if ARGV[7] == 'count' then return stored end
return out
"""
# One Redis: the feed entry and the runs index are written by the script itself (KEYS[3], KEYS[4]).
APPEND_LUA = _APPEND_BODY.replace(
    "SHARED_WRITES",
    """
  redis.call('XADD', KEYS[3], '*', unpack(entry))
  redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])""",
)
# Redis Cluster: KEYS are the run's only (log, hwm, outbox); the shared writes go to the outbox
# (events/outbox.py) with the first stream id as nonce; ARGV[9], ARGV[10] name the feed and runs keys.
APPEND_CLUSTER_LUA = _APPEND_BODY.replace(
    "SHARED_WRITES",
    """
  redis.call('RPUSH', KEYS[3], cjson.encode({n = first, c = {
    {'XADD', ARGV[9], '*', unpack(entry)},
    {'ZADD', ARGV[10], ARGV[2], ARGV[1]}}}))""",
)
APPEND_SHA = hashlib.sha1(APPEND_LUA.encode()).hexdigest()
APPEND_CLUSTER_SHA = hashlib.sha1(APPEND_CLUSTER_LUA.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Malformed:
    """A stream entry that could not be decoded; it goes to the dead-letter stream."""

    sid: str
    reason: str
    fields: dict[bytes, bytes]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    id: str
    source: str
    sid: str
    reason: str
    raw: str


def parse_append_reply(reply: Sequence[Any]) -> list[str | None]:
    """Script reply -> stream id per event, None where the event was already stored."""
    return [sid.decode() if isinstance(sid, bytes) else None for sid in reply]


def decode_entries(
    entries: Sequence[tuple[bytes, dict[bytes, bytes]]], run: str
) -> list[tuple[str, Event | Malformed]]:
    """Pure: XRANGE reply of `run`'s log -> (stream id, Event or Malformed) in order."""
    out: list[tuple[str, Event | Malformed]] = []
    for raw_sid, fields in entries:
        sid = raw_sid.decode()
        raw = fields.get(FIELD_BYTES)
        try:
            if raw is None:
                raise DecodeError(f"entry has no 'e' field (fields: {sorted(k.decode('latin-1') for k in fields)})")
            out.append((sid, decode(raw, run)))
        except DecodeError as exc:
            out.append((sid, Malformed(sid=sid, reason=str(exc), fields=dict(fields))))
    return out


def next_id(sid: str) -> str:
    """The exclusive form of a stream id for XRANGE ('(' prefix, Redis >= 6.2)."""
    return f"({sid}"


class EventStore:
    """Appends and reads events. Every write takes an optional `pipeline=` so callers can group writes."""

    def __init__(self, client: Client, *, keys: Keys | None = None) -> None:
        self.redis = client
        self.keys = keys or Keys()
        self.cluster = isinstance(client, RedisCluster)
        self.outbox = Outbox(client, self.keys)
        self._lua, self._sha, self._numkeys = (
            (APPEND_CLUSTER_LUA, APPEND_CLUSTER_SHA, 3) if self.cluster else (APPEND_LUA, APPEND_SHA, 4)
        )

    # -- writes ---------------------------------------------------------------------------------

    @overload
    def append(self, events: Sequence[Event]) -> list[str | None]: ...

    @overload
    def append(self, events: Sequence[Event], *, pipeline: Pipeline) -> None: ...

    @overload
    def append(self, events: Sequence[Event], *, pipeline: Pipeline | None) -> list[str | None] | None: ...

    def append(self, events: Sequence[Event], *, pipeline: Pipeline | None = None) -> list[str | None] | None:
        """Append events in order; an event whose (producer, seq) is already stored is skipped.

        Without `pipeline`, executes and returns the stream id of each event (None for a duplicate).
        With `pipeline` (a MULTI/EXEC the caller commits with other writes), only queues one script
        call per run; parse that part of the reply with `parse_append_reply`.
        """
        if not events:
            return [] if pipeline is None else None
        if pipeline is not None:
            for run, batch in _by_run(events):
                # EVAL, not EVALSHA: a NOSCRIPT error inside MULTI would still commit the rest.
                pipeline.execute_command("EVAL", self._lua, self._numkeys, *self._script_args(run, batch))
            return None
        results: list[str | None] = []
        for reply in self._execute(events, reply="ids"):
            results.extend(parse_append_reply(reply))
        return _restore_order(events, results)

    def append_count(self, events: Sequence[Event]) -> int:
        """Append like `append`, but reply only how many were stored (not duplicates): the agent's path."""
        return sum(int(r) for r in self._execute(events, reply="count")) if events else 0

    def shared(self, pipeline: Pipeline, run: str, *command: str | int | float) -> None:
        """Queue a write to a shared key (schedule, dead letters) with `run`'s writes in `pipeline`:
        inside the MULTI on one Redis, through the run's outbox on a cluster (call `flush` after)."""
        if self.cluster:
            pipeline.rpush(self.keys.outbox(run), encode_item(new_nonce(), [command]))
        else:
            pipeline.execute_command(*command)

    def flush(self, runs: Sequence[str]) -> None:
        """After a caller's pipeline with `runs`' writes committed: carry out their outbox (cluster only)."""
        if self.cluster:
            self.outbox.flush(runs)

    def _execute(self, events: Sequence[Event], *, reply: str) -> list[Any]:
        """One script call per run, pipelined; EVALSHA, falling back to EVAL where the script is not loaded."""
        groups = _by_run(events)
        with redis_errors("append events", run=events[0].run):
            pipe = self.redis.pipeline(transaction=False)
            for run, batch in groups:
                pipe.execute_command("EVALSHA", self._sha, self._numkeys, *self._script_args(run, batch, reply=reply))
            replies = pipe.execute(raise_on_error=False)
            for i, result in enumerate(replies):
                if isinstance(result, NoScriptError):  # not run at all: first use, or Redis restarted
                    replies[i] = self.redis.eval(self._lua, self._numkeys, *self._script_args(*groups[i], reply=reply))
                elif isinstance(result, Exception):
                    raise result
        self.flush([run for run, _ in groups])
        return replies

    def append_one(self, event: Event) -> str | None:
        result = self.append([event])
        assert result is not None
        return result[0]

    def _script_args(self, run: str, batch: Sequence[Event], *, reply: str = "ids") -> list[Any]:
        k = self.keys
        shared = [k.outbox(run)] if self.cluster else [k.feed(), k.runs()]
        args = [
            k.log(run), k.hwm(run), *shared, run, repr(max(e.ts for e in batch)),
            "\n".join([e.producer for e in batch]),
            "\n".join([str(e.seq) for e in batch]),
            "\n".join([e.type for e in batch]),
            b"\n".join([encode(e) for e in batch]),
            reply,
            urgency_marks(batch),
        ]  # fmt: skip
        return [*args, k.feed(), k.runs()] if self.cluster else args

    def dead_letter(
        self,
        *,
        source: str,
        sid: str,
        reason: str,
        fields: dict[bytes, bytes],
        pipeline: Pipeline | None = None,
        run: str | None = None,
    ) -> None:
        """Keep an unreadable entry with the reason, so nothing is lost and processing moves on.

        With `pipeline`, `run` names the run whose writes it joins (its outbox, on a cluster)."""
        raw = repr({k.decode("latin-1"): v.decode("utf-8", "replace") for k, v in fields.items()})
        command = ("XADD", self.keys.dead_letters(), "*", "source", source, "sid", sid, "reason", reason, "raw", raw)
        with redis_errors("dead-letter an entry"):
            if pipeline is None:
                self.redis.execute_command(*command)
            elif run is not None:
                self.shared(pipeline, run, *command)
            else:
                pipeline.execute_command(*command)

    # -- reads ----------------------------------------------------------------------------------

    def read(self, run: str, *, after: str | None = None, count: int = 1000) -> list[tuple[str, Event | Malformed]]:
        """One page of the run's log, oldest first, strictly after stream id `after`."""
        start = "-" if after is None else next_id(after)
        with redis_errors("read a run's events", run=run):
            entries = stream_entries(self.redis.xrange(self.keys.log(run), min=start, max="+", count=count))
        return decode_entries(entries, run)

    def iter_run(
        self, run: str, *, after: str | None = None, start: str = "-", until: str = "+", page: int = 10_000
    ) -> Iterator[tuple[str, Event | Malformed]]:
        """A run's log page by page: from stream id `start` (or strictly after `after`) up to `until`."""
        key = self.keys.log(run)
        if after is not None:
            start = next_id(after)
        while True:
            with redis_errors("read a run's events", run=run):
                entries = stream_entries(self.redis.xrange(key, min=start, max=until, count=page))
            if not entries:
                return
            yield from decode_entries(entries, run)
            if len(entries) < page:
                return
            start = next_id(entries[-1][0].decode())

    def get(self, run: str, sid: str) -> Event | Malformed | None:
        with redis_errors("read an event", run=run):
            entries = stream_entries(self.redis.xrange(self.keys.log(run), min=sid, max=sid, count=1))
        return decode_entries(entries, run)[0][1] if entries else None

    def newest_pages(self, ends: Sequence[tuple[str, str]], *, count: int, what: str) -> list[list[Entry]]:
        """For each (run, end), up to `count` raw entries newest first (events/history.py): one pipelined round
        trip for several runs, one XREVRANGE (its error naming the run) for one."""
        if len(ends) == 1:
            ((run, end),) = ends
            return [history.newest_first(self.redis, self.keys, run, end=end, count=count, what=what)]
        return history.newest_pages(self.redis, self.keys, ends, count=count, what=what)

    def length(self, run: str) -> int:
        with redis_errors("measure a run's log", run=run):
            return int(self.redis.xlen(self.keys.log(run)))

    def runs(self) -> list[tuple[str, float]]:
        """Known runs with the time of their last appended event, most recent first."""
        with redis_errors("list runs"):
            pairs = scored_members(self.redis.zrevrange(self.keys.runs(), 0, -1, withscores=True))
        return [(name.decode(), float(score)) for name, score in pairs]

    def dead_letters(self, *, count: int = 100) -> list[DeadLetter]:
        with redis_errors("read dead letters"):
            entries = stream_entries(self.redis.xrevrange(self.keys.dead_letters(), count=count))
        return [
            DeadLetter(
                id=sid.decode(),
                source=f.get(b"source", b"").decode(),
                sid=f.get(b"sid", b"").decode(),
                reason=f.get(b"reason", b"").decode(),
                raw=f.get(b"raw", b"").decode(),
            )
            for sid, f in entries
        ]


def _by_run(events: Sequence[Event]) -> list[tuple[str, list[Event]]]:
    groups: dict[str, list[Event]] = {}
    for e in events:
        groups.setdefault(e.run, []).append(e)
    return list(groups.items())


def _restore_order(events: Sequence[Event], grouped_results: list[str | None]) -> list[str | None]:
    """Results come back grouped by run (in first-seen run order); map them to the input order."""
    runs = list(dict.fromkeys(e.run for e in events))
    positions: dict[str, list[int]] = {run: [] for run in runs}
    for i, e in enumerate(events):
        positions[e.run].append(i)
    out: list[str | None] = [None] * len(events)
    flat = iter(grouped_results)
    for run in runs:
        for i in positions[run]:
            out[i] = next(flat)
    return out

"""The stop breaker's state in Redis: the policy STOPs carried out lately across all runs, and the ones held.

A wrong policy (a threshold off by a factor of a million, reloaded by SIGHUP) would stop every healthy run at
once. The workers ask `admit` before they carry out a policy STOP (workers/breaker.py decides which ones ask);
past `limit` stops within `window_s` it answers no, and the STOP is held for a person instead.

`admit` is one Lua script, so that workers racing on fifty runs cannot each see room for one more; it is
idempotent per request id (a job redone after a crash finds its stop counted already and is admitted again).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainwarden.events.keys import Keys
from trainwarden.events.redis_types import Client

# KEYS[1] the window (zset request id -> ts); ARGV now, window_s, limit, request id. Returns {admitted, count}.
_ADMIT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (tonumber(ARGV[1]) - tonumber(ARGV[2])))
if redis.call('ZSCORE', KEYS[1], ARGV[4]) then
  return {1, redis.call('ZCARD', KEYS[1])}
end
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[3]) then
  return {0, n}
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 60)
return {1, n + 1}
"""


# KEYS[1] the rules' first loads (hash definition -> ts); ARGV now, then the definitions. The first policy ever
# noted is the baseline (0: known since before the workers): only a rule a later policy brought is new.
_NOTE = """
local first = redis.call('EXISTS', KEYS[1]) == 0
for i = 2, #ARGV do
  if first then
    redis.call('HSET', KEYS[1], ARGV[i], '0')
  else
    redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[1])
  end
end
return 0
"""


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: bool
    stops: int  # policy STOPs carried out within the window, this one included when admitted


def admit(client: Client, keys: Keys, *, request: str, now: float, window_s: float, limit: int) -> Admission:
    """Count the policy STOP `request` in the window if there is room for it (at most `limit` in `window_s`)."""
    admitted, stops = client.eval(_ADMIT, 1, keys.breaker(), repr(now), repr(window_s), str(limit), request)
    return Admission(bool(admitted), int(stops))


def recent(client: Client, keys: Keys, *, now: float, window_s: float) -> int:
    """Policy STOPs carried out within `window_s` before `now`."""
    return int(client.zcount(keys.breaker(), repr(now - window_s), "+inf"))


def note_rules(client: Client, keys: Keys, definitions: Sequence[str], *, now: float) -> None:
    """A policy holding these rule definitions was loaded at `now`: each one not seen before is first loaded then
    (those of the first policy ever noted count as loaded since always)."""
    if definitions:
        client.eval(_NOTE, 1, keys.breaker_rules(), repr(now), *definitions)


def first_loaded(client: Client, keys: Keys, definition: str) -> float | None:
    """When a policy holding the rule `definition` was first loaded; None: never noted (nothing to tell)."""
    raw = client.hget(keys.breaker_rules(), definition)
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def running_cached(client: Client, keys: Keys) -> int | None:
    """The count of running runs a worker kept lately (`keep_running`); None: none kept, or it expired."""
    raw = client.get(keys.breaker_running())
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def keep_running(client: Client, keys: Keys, running: int, *, ttl_s: float) -> None:
    """Keep the count of running runs `ttl_s` seconds, for every worker: the share's base is counted once in a while,
    not at every STOP."""
    client.set(keys.breaker_running(), str(running), px=max(1, int(ttl_s * 1000)))


def hold(client: Client, keys: Keys, run: str, held: dict[str, Any]) -> None:
    """Record `run`'s held STOP (its decision, rule, reason, when), for the list a person releases or cancels."""
    client.hset(keys.breaker_held(), run, json.dumps(held, sort_keys=True))


def held_stops(client: Client, keys: Keys) -> dict[str, dict[str, Any]]:
    """Every held STOP by run (an entry that does not read as JSON is skipped: it can drive nothing)."""
    out: dict[str, dict[str, Any]] = {}
    for run, raw in client.hgetall(keys.breaker_held()).items():
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            out[run.decode() if isinstance(run, bytes) else str(run)] = value
    return out


def settle(client: Client, keys: Keys, run: str) -> None:
    """`run`'s held STOP was released or cancelled (or the run ended): off the list."""
    client.hdel(keys.breaker_held(), run)

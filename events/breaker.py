"""The stop breaker's state in Redis: the policy STOPs carried out lately across all runs, and the ones held.

A wrong policy (a threshold off by a factor of a million, reloaded by SIGHUP) would stop every healthy run at
once. The workers ask `admit` before they carry out a policy STOP (workers/breaker.py decides which ones ask);
past `limit` stops within `window_s` it answers no, and the STOP is held for a person instead.

`admit` is one Lua script, so that workers racing on fifty runs cannot each see room for one more; it is
idempotent per request id (a job redone after a crash finds its stop counted already and is admitted again).
"""

from __future__ import annotations

import json
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


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: bool
    stops: int  # policy STOPs carried out within the window, this one included when admitted


def admit(client: Client, keys: Keys, *, request: str, now: float, window_s: float, limit: int) -> Admission:
    """Count the policy STOP `request` in the window if there is room for it (at most `limit` in `window_s`)."""
    admitted, stops = client.eval(_ADMIT, 1, keys.breaker(), repr(now), repr(window_s), str(limit), request)
    return Admission(bool(admitted), int(stops))


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

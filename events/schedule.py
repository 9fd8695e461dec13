"""The tick schedule: a sorted set of runs by when they are next due a `tick` (quiet runs still get evaluated).

Workers write it with their checkpoints (`EventStore.shared`, inside their MULTI); the dispatcher reads what
is due and pushes it back by the retry interval, so a tick lost with its worker comes again.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client, scored_members


def due_runs(client: Client, keys: Keys, now: float, *, count: int) -> list[tuple[bytes, float]]:
    """Up to `count` (run, due time) pairs due at `now`, earliest first."""
    with redis_errors("read the tick schedule"):
        return scored_members(client.zrangebyscore(keys.schedule(), "-inf", now, start=0, num=count, withscores=True))


def push_back(client: Client, keys: Keys, runs: Sequence[bytes], *, to: float) -> None:
    """Make `runs` due again at `to`, if they are still scheduled (XX: a run taken off meanwhile stays off)."""
    with redis_errors("update the tick schedule"):
        client.zadd(keys.schedule(), dict.fromkeys(runs, to), xx=True)

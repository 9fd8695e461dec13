"""The notifier's state in Redis, behind one small repository: its checkpoint per run and the marks
of exactly-once delivery per notification.

    tw:{run}:notify    after (the last feed position folded), state (noise control's, as JSON)
    tw:{run}:notified  notification key -> its mark (intent / sent / failed, as JSON)

The notifier (bot/notifier.py) and delivery (bot/delivery.py) call no Redis command themselves: they
read through this, and queue their writes into the caller's fenced MULTI (`pipeline=`), so a
checkpoint and the results it covers commit together or not at all. Reads map Redis errors to
trainwarden's (events/redis_errors.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from redis.client import Pipeline
from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client, hash_fields


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """How far the notifier folded a run's log, and its noise-control state at that point."""

    after: str | None
    state: dict[str, Any]


class NotifyStateRepo:
    def __init__(self, client: Client, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def checkpoint(self, run: str) -> Checkpoint | None:
        """The run's checkpoint; None before the notifier first wrote one."""
        with redis_errors("read the notifier's checkpoint", run=run):
            raw = hash_fields(self.client.hgetall(self.keys.notify(run)))
        if not raw:
            return None
        return Checkpoint(after=raw[b"after"].decode() or None, state=json.loads(raw.get(b"state") or b"{}"))

    def save_checkpoint(self, run: str, checkpoint: Checkpoint, *, pipeline: Pipeline) -> None:
        """Queue the run's checkpoint into `pipeline` (the caller's fenced MULTI)."""
        folded = json.dumps(checkpoint.state)
        pipeline.hset(self.keys.notify(run), mapping={"after": checkpoint.after or "", "state": folded})

    def mark(self, run: str, key: str) -> dict[str, Any] | None:
        """The recorded status of notification `key` (None: never tried)."""
        with redis_errors("read a notification's status", run=run):
            raw = self.client.hget(self.keys.notified(run), key)
        return None if raw is None else dict(json.loads(raw))

    def save_mark(self, run: str, key: str, mark: dict[str, Any], *, pipeline: Pipeline) -> None:
        """Queue notification `key`'s status into `pipeline` (with its audit event, one MULTI)."""
        pipeline.hset(self.keys.notified(run), key, json.dumps(mark))

"""Writes to shared keys that follow a run's writes, for Redis Cluster.

On one Redis, an append (or a worker's commit) writes the run's keys and the shared ones (the
feed, the runs and schedule sorted sets, dead letters) in one script or MULTI/EXEC. On a
cluster those live in other slots, which a script or a transaction cannot touch. So the run's
transaction pushes those writes, as data, onto the run's own outbox list (same slot, same
atomic step), and they are carried out right after the commit. A writer that dies in between
leaves them in the outbox, where the dispatcher's sweep finds them. Every outbox write is safe to
repeat (a second feed entry for the same events is a no-op for its consumers; ZADD, ZREM are
idempotent), so two flushers racing only repeat work; each item carries a unique nonce and is
removed by value once done, so neither can remove what the other has not carried out.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from trainwarden.events.errors import DecodeError
from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors

log = logging.getLogger(__name__)

Command = Sequence[str | int | float]


def encode_item(nonce: str, commands: Sequence[Command]) -> str:
    return json.dumps({"n": nonce, "c": [list(c) for c in commands]}, separators=(",", ":"))


def decode_item(raw: bytes | str) -> list[list[Any]]:
    try:
        obj = json.loads(raw)
        commands = obj["c"]
    except (ValueError, KeyError, TypeError) as exc:
        raise DecodeError(f"unreadable outbox item {raw!r}: {exc}") from None
    if not isinstance(commands, list) or not all(isinstance(c, list) and c for c in commands):
        raise DecodeError(f"outbox item {raw!r} does not hold a list of commands")
    return commands


def new_nonce() -> str:
    return uuid.uuid4().hex


class Outbox:
    """Carries out (flushes) the writes queued in runs' outboxes."""

    def __init__(self, client: Any, keys: Keys) -> None:
        self.redis = client
        self.keys = keys

    def flush(self, runs: Iterable[str]) -> int:
        """Carry out what the runs' outboxes hold, oldest first; returns how many items were done.

        Three pipelined round trips whatever the number of runs: read, carry out, remove."""
        return self._carry_out(self._read([self.keys.outbox(run) for run in dict.fromkeys(runs)]))

    def sweep(self) -> int:
        """Flush every outbox a dead writer left behind (the dispatcher calls this now and then)."""
        with redis_errors("look for outboxes left behind"):
            keys = list(self.redis.scan_iter(match=self.keys.outbox_pattern(), _type="list", count=1000))
        done = self._carry_out(self._read(keys))
        if done:
            log.info("carried out %d outbox item(s) left in %d outbox(es)", done, len(keys))
        return done

    def _read(self, keys: Sequence[str | bytes]) -> list[tuple[str | bytes, list[bytes]]]:
        if not keys:
            return []
        with redis_errors("read outboxes"):
            pipe = self.redis.pipeline(transaction=False)
            for key in keys:
                pipe.lrange(key, 0, -1)
            found = pipe.execute()
        return [(key, items) for key, items in zip(keys, found, strict=True) if items]

    def _carry_out(self, found: Sequence[tuple[str | bytes, list[bytes]]]) -> int:
        if not found:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for key, items in found:
            for raw in items:
                try:
                    commands = decode_item(raw)
                except DecodeError as exc:
                    log.error("dropping %s from %r: %s", raw[:200], key, exc)
                    continue
                for command in commands:
                    pipe.execute_command(*command)
        with redis_errors("carry out outbox writes"):
            pipe.execute()
            done = self.redis.pipeline(transaction=False)
            for key, items in found:
                for raw in items:
                    done.lrem(key, 1, raw)
            done.execute()
        return sum(len(items) for _, items in found)

"""A run's lock: one job works on a run at a time (redis-py's Lock on `Keys.lock`, with a timeout).

The lock keeps jobs from doing the same work twice; it is not what keeps them correct (the WATCHed
checkpoint is: events/checkpoints.py), so a lock lost to a stall ends a turn, and nothing worse.
"""

from __future__ import annotations

from collections.abc import Callable

import redis
from redis.lock import Lock
from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client


class RunLock:
    def __init__(self, client: Client, keys: Keys, run: str, *, timeout_s: float) -> None:
        self.run = run
        self._lock = Lock(client, keys.lock(run), timeout=timeout_s, blocking_timeout=timeout_s)

    def acquire(self, *, blocking: bool = True) -> bool:
        """Take the lock, waiting up to the timeout (`blocking`) or not at all; whether it was taken."""
        with redis_errors("take a run's lock", run=self.run):
            return bool(self._lock.acquire(blocking=blocking))

    def extend(self) -> bool:
        """Renew the lock's timeout; False when it expired and is no longer ours."""
        return self._still_ours(self._lock.reacquire, redis.exceptions.LockNotOwnedError, "renew a run's lock")

    def release(self) -> bool:
        """Let go of the lock; False when it had already expired."""
        return self._still_ours(self._lock.release, redis.exceptions.LockError, "release a run's lock")

    def _still_ours(self, call: Callable[[], object], lost: type[redis.exceptions.LockError], what: str) -> bool:
        with redis_errors(what, run=self.run):
            try:
                call()
            except lost:
                return False
        return True

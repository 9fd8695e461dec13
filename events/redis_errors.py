"""redis-py exceptions -> trainwarden's (a tiny module so every Redis-facing module can share it).

What counts as *transient* (Redis will answer again if asked later: `StoreUnavailable`, retried by
every daemon) is decided here once: no connection, a timeout, a server still loading its data after
a restart (LOADING), a replica that refuses writes or a primary whose replicas are gone during a
failover (READONLY, MASTERDOWN, NOREPLICAS, UNBLOCKED), a cluster reshuffling slots (TRYAGAIN,
CLUSTERDOWN). Any other refusal is a `StoreError`: retrying would not help.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import redis
from trainwarden.events.errors import StoreError, StoreUnavailable

TRANSIENT_ERRORS: tuple[type[redis.RedisError], ...] = (
    redis.ConnectionError,  # includes BusyLoadingError (LOADING)
    redis.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.ClusterDownError,  # includes MasterDownError
    redis.exceptions.TryAgainError,
)
TRANSIENT_REPLIES = ("LOADING", "READONLY", "MASTERDOWN", "NOREPLICAS", "UNBLOCKED", "TRYAGAIN", "CLUSTERDOWN")


def transient(exc: BaseException) -> bool:
    """Whether `exc` says Redis cannot answer *now* (an outage, a restart, a failover), not that it refused."""
    if isinstance(exc, (StoreUnavailable, *TRANSIENT_ERRORS)):
        return True
    return isinstance(exc, redis.ResponseError) and str(exc).startswith(TRANSIENT_REPLIES)


@contextlib.contextmanager
def redis_errors(what: str, **context: Any) -> Iterator[None]:
    """Convert redis-py exceptions into trainwarden's, keeping the cause."""
    try:
        yield
    except redis.RedisError as exc:
        if transient(exc):
            raise StoreUnavailable(f"Redis unreachable while trying to {what}: {exc}", **context) from exc
        if isinstance(exc, redis.ResponseError):
            raise StoreError(f"Redis refused to {what}: {exc}", **context) from exc
        raise

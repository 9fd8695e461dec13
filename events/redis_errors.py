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
from trainwarden.events.errors import StoreAuthFailed, StoreError, StoreUnavailable

AUTH_REPLIES = ("NOAUTH", "WRONGPASS", "NOPERM", "invalid password", "invalid username-password")


def is_auth_error(exc: BaseException) -> bool:
    """Whether Redis refused our credentials or an ACL user's rights (not an outage: retrying cannot help)."""
    return isinstance(exc, redis.AuthenticationError | redis.exceptions.NoPermissionError) or (
        isinstance(exc, redis.ResponseError) and any(s in str(exc) for s in AUTH_REPLIES)
    )


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
    if is_auth_error(exc):
        return False  # an AuthenticationError is a ConnectionError, but waiting will not fix a password
    if isinstance(exc, (StoreUnavailable, *TRANSIENT_ERRORS)):
        return True
    return isinstance(exc, redis.ResponseError) and str(exc).startswith(TRANSIENT_REPLIES)


@contextlib.contextmanager
def redis_errors(what: str, **context: Any) -> Iterator[None]:
    """Convert redis-py exceptions into trainwarden's, keeping the cause."""
    try:
        yield
    except redis.RedisError as exc:
        if is_auth_error(exc):
            raise StoreAuthFailed(f"Redis refused the credentials while trying to {what}: {exc}", **context) from exc
        if transient(exc):
            raise StoreUnavailable(f"Redis unreachable while trying to {what}: {exc}", **context) from exc
        if isinstance(exc, redis.ResponseError):
            raise StoreError(f"Redis refused to {what}: {exc}", **context) from exc
        raise

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
from trainwarden.events.errors import StoreAuthFailed, StoreError, StoreRefused, StoreUnavailable

AUTH_ERRORS: tuple[type[redis.RedisError], ...] = (redis.AuthenticationError, redis.exceptions.NoPermissionError)
# what a CLI catches to say "Redis refused the credentials" in one line: ours, or redis-py's raised where a library
# (RQ) spoke to Redis itself
AUTH_FAILURES: tuple[type[Exception], ...] = (StoreAuthFailed, *AUTH_ERRORS)
AUTH_REPLIES = ("NOAUTH", "WRONGPASS", "NOPERM", "invalid password", "invalid username-password")


def is_auth_error(exc: BaseException) -> bool:
    """Whether Redis refused our credentials or an ACL user's rights (not an outage: retrying cannot help)."""
    return isinstance(exc, AUTH_ERRORS) or (
        isinstance(exc, redis.ResponseError) and any(s in str(exc) for s in AUTH_REPLIES)
    )


TRANSIENT_ERRORS: tuple[type[redis.RedisError], ...] = (
    redis.ConnectionError,  # includes BusyLoadingError (LOADING)
    redis.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.ClusterDownError,  # includes MasterDownError
    redis.exceptions.TryAgainError,
)
TRANSIENT_REPLIES = ("LOADING", "READONLY", "MASTERDOWN", "NOREPLICAS", "UNBLOCKED", "TRYAGAIN", "CLUSTERDOWN")
# Redis is up but refuses writes: the words an operator reads (redis-py strips the code of the errors it maps
# to a class, OutOfMemoryError and ReadOnlyError, so those are told by class)
REFUSALS = {
    "OOM": "out of memory",
    "MISCONF": "it cannot save to disk (MISCONF)",
    "READONLY": "it is a read-only replica",
    "BUSY": "it is busy running a script (BUSY)",
    "NOREPLICAS": "too few replicas acknowledge writes (NOREPLICAS)",
}


def refusal(exc: BaseException) -> str | None:
    """Pure: why Redis refuses writes for now, in words (`out of memory`), or None when `exc` is no such refusal."""
    if isinstance(exc, redis.exceptions.OutOfMemoryError):
        return REFUSALS["OOM"]
    if isinstance(exc, redis.exceptions.ReadOnlyError):
        return REFUSALS["READONLY"]
    if isinstance(exc, redis.ResponseError):
        return REFUSALS.get(str(exc).partition(" ")[0])  # the whole code: BUSYGROUP is no BUSY
    return None


def transient(exc: BaseException) -> bool:
    """Whether `exc` says Redis cannot take the command *now* (an outage, a restart, a failover, a refusal of
    writes it lifts once memory or disk is freed), not that it never will."""
    if is_auth_error(exc):
        return False  # an AuthenticationError is a ConnectionError, but waiting will not fix a password
    if isinstance(exc, (StoreUnavailable, *TRANSIENT_ERRORS)):
        return True
    if refusal(exc) is not None:
        return True
    return isinstance(exc, redis.ResponseError) and str(exc).startswith(TRANSIENT_REPLIES)


def describe(exc: BaseException) -> str:
    """Pure: a transient error as a daemon logs it, saying whether Redis is away or refuses writes."""
    if isinstance(exc, StoreError) or (words := refusal(exc)) is None:
        return str(exc)
    return f"Redis refuses writes: {words}: {exc}"


@contextlib.contextmanager
def redis_errors(what: str, **context: Any) -> Iterator[None]:
    """Convert redis-py exceptions into trainwarden's, keeping the cause."""
    try:
        yield
    except redis.RedisError as exc:
        if is_auth_error(exc):
            raise StoreAuthFailed(f"Redis refused the credentials while trying to {what}: {exc}", **context) from exc
        if (words := refusal(exc)) is not None:
            raise StoreRefused(f"Redis refuses writes: {words}, while trying to {what}: {exc}", **context) from exc
        if transient(exc):
            raise StoreUnavailable(f"Redis unreachable while trying to {what}: {exc}", **context) from exc
        if isinstance(exc, redis.ResponseError):
            raise StoreError(f"Redis refused to {what}: {exc}", **context) from exc
        raise

"""redis-py exceptions -> trainwarden's (a tiny module so every Redis-facing module can share it)."""

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


@contextlib.contextmanager
def redis_errors(what: str, **context: Any) -> Iterator[None]:
    """Convert redis-py exceptions into trainwarden's, keeping the cause."""
    try:
        yield
    except redis.RedisError as exc:
        if is_auth_error(exc):
            raise StoreAuthFailed(f"Redis refused the credentials while trying to {what}: {exc}", **context) from exc
        if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
            raise StoreUnavailable(f"Redis unreachable while trying to {what}: {exc}", **context) from exc
        if isinstance(exc, redis.ResponseError):
            raise StoreError(f"Redis refused to {what}: {exc}", **context) from exc
        raise

"""redis-py exceptions -> trainwarden's (a tiny module so every Redis-facing module can share it)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import redis
from trainwarden.events.errors import StoreError, StoreUnavailable


@contextlib.contextmanager
def redis_errors(what: str, **context: Any) -> Iterator[None]:
    """Convert redis-py exceptions into trainwarden's, keeping the cause."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise StoreUnavailable(f"Redis unreachable while trying to {what}: {exc}", **context) from exc
    except redis.ResponseError as exc:
        raise StoreError(f"Redis refused to {what}: {exc}", **context) from exc

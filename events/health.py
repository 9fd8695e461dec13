"""Whether Redis answers: the one PING every daemon, the CLI and the probes share."""

from __future__ import annotations

from typing import Any

import redis
from trainwarden.events.errors import StoreAuthFailed, StoreError
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client


def ping(client: Client, *, what: str = "connect", **context: Any) -> None:
    """PING, with Redis errors as trainwarden's (StoreUnavailable, StoreAuthFailed...) saying `what` failed."""
    with redis_errors(what, **context):
        client.ping()


def answers(client: Client) -> bool:
    """Whether Redis answers a PING; refused credentials still raise (StoreAuthFailed): it answers, and refuses us."""
    try:
        ping(client)
    except StoreAuthFailed:
        raise
    except (StoreError, redis.RedisError):  # refused, timed out, or not Redis at all
        return False
    return True


def not_ready(client: Client) -> BaseException | None:
    """The readiness probe's PING: None when Redis answers, else the error, whatever it was."""
    try:
        client.ping()
    except Exception as exc:  # any failure to answer is "not ready"
        return exc
    return None

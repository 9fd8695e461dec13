"""What the bot's dead-man check reads to tell a stalled trainwarden: the dispatcher's last-alive mark and
how far behind a feed group is. Kept apart from the components' heartbeats (events/heartbeat.py): one
plain key the dispatcher overwrites every few seconds, cheap enough for the bot to poll.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis
from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client, bytes_value


@dataclass(frozen=True, slots=True)
class Backlog:
    """A feed group's entries read but not acknowledged: how many, and the oldest's stream id."""

    pending: int
    oldest: str | None


def mark_alive(client: Client, keys: Keys, role: str, now: float) -> None:
    """Say that `role` (the dispatcher) made progress at `now`."""
    with redis_errors(f"write the {role}'s heartbeat"):
        client.set(keys.heartbeat(role), repr(now))


def last_alive(client: Client, keys: Keys, role: str) -> float | None:
    """When `role` last said it made progress; None when it never did."""
    with redis_errors("check trainwarden's progress"):
        raw = bytes_value(client.get(keys.heartbeat(role)))
    return None if raw is None else float(raw)


def backlog(client: Client, keys: Keys, group: str) -> Backlog:
    """The feed group's pending entries; none when the group does not exist yet (no consumer ever ran)."""
    with redis_errors("check trainwarden's progress"):
        try:
            reply = client.xpending(keys.feed(), group)
        except redis.ResponseError:  # no group yet
            return Backlog(0, None)
    oldest = reply["min"]
    return Backlog(int(reply["pending"]), oldest.decode() if isinstance(oldest, bytes) else oldest)

"""What the metrics endpoint reads of the event log: each feed group's backlog and the dead letters' count.

Read-only and best effort: an endpoint scraped every few seconds should show what it can.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client


@dataclass(frozen=True, slots=True)
class GroupStats:
    """A feed consumer group: entries delivered but not acknowledged, and entries not yet delivered."""

    name: str
    pending: int
    lag: int


def feed_groups(client: Client, keys: Keys) -> list[GroupStats]:
    """The feed's consumer groups; none before the feed exists (XINFO fails on a missing key)."""
    try:
        groups = client.xinfo_groups(keys.feed())
    except Exception:  # no feed yet
        return []
    return [
        GroupStats(
            name=g["name"].decode() if isinstance(g["name"], bytes) else str(g["name"]),
            pending=int(g.get("pending") or 0),
            lag=int(g.get("lag") or 0),
        )
        for g in groups
    ]


def dead_letter_count(client: Client, keys: Keys) -> int:
    with redis_errors("count the dead letters"):
        return int(client.xlen(keys.dead_letters()))

"""One agent per host: the host's agent lease (events/lease.py), with its fencing token.

Two `trainwarden agent` processes on one host (a unit plus a hand start) would each send SIGINT to a
watched run, and a second Ctrl-C during a clean shutdown means "kill now" to Lightning, accelerate
and most loops: the checkpoint being saved is lost. So only the holder of `agent/<host>` watches and
stops runs; another agent stands by (events/standby.py) and takes over when the holder stops, its
process is gone, or its lease lapses. The holder checks the fence right before it signals a run, so
an agent that was paused past its lease (and taken over) signals nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from trainwarden.events.errors import LeaseLost, StoreError
from trainwarden.events.keys import Keys
from trainwarden.events.lease import Lease
from trainwarden.events.redis_errors import transient

RETRY_S = 1.0  # how often an agent that does not hold its host's lease (Redis was away) asks for it


def name(host: str) -> str:
    """The lease's name (its keys: `<namespace>:{agent/<host>}:lease` and `:fence`)."""
    return f"agent/{host}"


def agent_lease(client: Any, keys: Keys, host: str, *, ttl_s: float) -> Lease:
    return Lease(client, keys, name(host), ttl_s=ttl_s)


class LeaseKeeper:
    """The agent loop's hold on its host's lease: renewed every third of its TTL, or taken (once a second) while
    this agent does not hold it, because it started while Redis was away or the lease lapsed in an outage. While
    Redis is away no stop can reach the agent, so it reads and spools on unfenced; once Redis answers it holds the
    lease again, or stands down (LeaseLost) because another agent took it."""

    def __init__(self, lease: Lease, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.lease, self.clock = lease, clock
        self.asked_at = clock()

    def keep(self) -> None:
        lease = self.lease
        if self.clock() - self.asked_at < (lease.ttl_s / 3 if lease.token is not None else RETRY_S):
            return
        self.asked_at = self.clock()
        try:
            if lease.token is not None and lease.renew():
                return
            holding = lease.acquire()
        except StoreError as exc:
            if not transient(exc):
                raise
            return
        if not holding.mine:
            raise LeaseLost(f"another agent ({holding.holder}) holds the {lease.name} lease; this one stands down")

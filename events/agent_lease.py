"""One agent per host: the host's agent lease (events/lease.py), with its fencing token.

Two `trainwarden agent` processes on one host (a unit plus a hand start) would each send SIGINT to a
watched run, and a second Ctrl-C during a clean shutdown means "kill now" to Lightning, accelerate
and most loops: the checkpoint being saved is lost. So only the holder of `agent/<host>` watches and
stops runs; another agent stands by (events/standby.py) and takes over when the holder stops, its
process is gone, or its lease lapses. The holder checks the fence right before it signals a run, so
an agent that was paused past its lease (and taken over) signals nothing.
"""

from __future__ import annotations

from typing import Any

from trainwarden.events.keys import Keys
from trainwarden.events.lease import Lease


def name(host: str) -> str:
    """The lease's name (its keys: `<namespace>:{agent/<host>}:lease` and `:fence`)."""
    return f"agent/{host}"


def agent_lease(client: Any, keys: Keys, host: str, *, ttl_s: float) -> Lease:
    return Lease(client, keys, name(host), ttl_s=ttl_s)

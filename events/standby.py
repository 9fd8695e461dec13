"""Wait for a role's lease (events/lease.py): the one wait of the notifier and of a host's agent.

A second `trainwarden bot`, or a second `trainwarden agent` on one host, stands by here until the holder
stops, its process is gone (kill -9) or its lease lapses; what it says names the holder once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from trainwarden.events.errors import StoreError
from trainwarden.events.heartbeat import NOT_AN_ERROR
from trainwarden.events.lease import Holding, Lease
from trainwarden.events.loop import Outage
from trainwarden.events.redis_errors import transient

log = logging.getLogger(__name__)

POLL_S = 1.0  # how often a standby asks for the lease (a takeover waits at most this after it lapses)


def stand_by(lease: Lease, stop: threading.Event, *, role: str, doing: str,
             busy: Callable[[Holding], Exception] | None = None, poll_s: float = POLL_S,
             unheld_in_outage: bool = False) -> bool:  # fmt: skip
    """Wait until this process holds `lease` (True) or `stop` is set (False). With `busy` it does not wait:
    it raises what `busy` makes of the holder (one line naming it). With `unheld_in_outage`, Redis away (or
    refusing writes) is no reason to wait: True at once, the lease not held; the caller takes it once Redis
    answers (an agent must read and spool its runs through an outage, and no stop reaches it meanwhile)."""
    outage = Outage(f"{lease.name} lease")
    said: Holding | None = None
    while not stop.is_set():
        try:
            holding = lease.acquire()
        except StoreError as exc:
            if busy is not None or not transient(exc):
                raise
            if unheld_in_outage:
                log.warning("cannot take the %s lease now (%s); this %s %s without it and takes it once "
                            "Redis answers (another %s then makes it stand down)", lease.name, exc, role, doing,
                            role)  # fmt: skip
                return True
            stop.wait(outage.failed(exc))
            continue
        outage.succeeded()
        if holding.mine:
            # a role, not an error: logged at WARNING (seen at --log-level WARNING), kept out of `health`'s LAST ERROR
            log.warning("this %s holds the %s lease (fencing token %d) and %s", role, lease.name, holding.token, doing,
                        extra=NOT_AN_ERROR)  # fmt: skip
            return True
        if busy is not None:
            raise busy(holding)
        if said is None or said.holder != holding.holder:
            log.warning("standing by: %s %s holds the %s lease (token %d, %.0fs left); this one takes over when it "
                        "stops or its lease lapses", role, holding.holder, lease.name, holding.token,
                        holding.ttl_s, extra=NOT_AN_ERROR)  # fmt: skip
            said = holding
        stop.wait(min(poll_s, max(0.05, holding.ttl_s)))
    return False

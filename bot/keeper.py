"""One notifier at a time, and a heartbeat that means alive: the notifier's lease and its beat.

A second `trainwarden bot` would post every message twice, so the notifier holds a lease with a
fencing token (events/lease.py) and another one stands by (`stand_by`) until the lease lapses or
its holder's process is gone. The holder renews the lease and writes its heartbeat from a thread of
its own (`Keeper`), so neither stalls while the loop waits out Slack's rate limit, a Retry-After or
a slow call; both are withheld when the loop made no progress and declared no wait (events/heartbeat.py,
`Liveness`), so a hung notifier goes silent and loses its lease to the standby.
"""

from __future__ import annotations

import logging
import threading

from trainwarden.bot.errors import NotifierBusy
from trainwarden.events import standby
from trainwarden.events.heartbeat import Liveness
from trainwarden.events.lease import Holding, Lease
from trainwarden.events.silence import Pulse

log = logging.getLogger(__name__)

POLL_S = standby.POLL_S


def stand_by(lease: Lease, stop: threading.Event, *, burst: bool, poll_s: float = POLL_S) -> bool:
    """Wait until this process holds `lease` (True) or `stop` is set (False). A --burst run does not wait:
    it raises NotifierBusy, one line naming the holder."""

    def busy(holding: Holding) -> NotifierBusy:
        return NotifierBusy(f"another notifier ({holding.holder}) holds the notifier lease and posts; "
                            "--burst posts nothing while it runs")  # fmt: skip

    return standby.stand_by(lease, stop, role="notifier", doing="posts", busy=busy if burst else None, poll_s=poll_s)


class Keeper:
    """The holder's lease renewal and heartbeat, from a thread, while the loop is alive (see the module doc)."""

    def __init__(self, *, lease: Lease | None, pulse: Pulse | None, liveness: Liveness) -> None:
        self.lease = lease
        self.pulse = pulse
        self.liveness = liveness
        intervals = [pulse.heartbeat.interval_s] if pulse is not None else []
        if lease is not None:
            intervals.append(lease.ttl_s / 3)
        self.every_s = min([POLL_S, *intervals])
        self._withheld = False

    def start(self, stop: threading.Event) -> threading.Thread:
        def loop() -> None:
            while not stop.wait(self.every_s):
                try:
                    self.tick()
                except Exception as exc:  # a beat or a renewal never kills the process; the next one tries again
                    log.debug("notifier keeper: %s", exc)

        thread = threading.Thread(target=loop, name="notifier-keeper", daemon=True)
        thread.start()
        return thread

    def tick(self) -> None:
        if not self.liveness.alive():
            if not self._withheld:
                log.error("the notifier loop has made no progress for %.0fs and declared no wait; its heartbeat "
                          "and lease are withheld", self.liveness.stale_s)  # fmt: skip
            self._withheld = True
            return
        self._withheld = False
        if self.pulse is not None:
            self.pulse.heartbeat.passing()  # alive (`/healthz`), a standby included
        if self.lease is not None:
            if self.lease.token is None:
                return  # standing by: the holder beats
            if not self.lease.renew():
                log.warning("the notifier lease lapsed and another notifier took it; this one stands by")
                return
        if self.pulse is not None:
            self.pulse.heartbeat.notice = self.liveness.notice
            self.pulse.tick()

"""The loop every consumer daemon runs: step until stopped, back off while Redis is unreachable."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from trainwarden.events.errors import StoreRefused
from trainwarden.events.heartbeat import NOT_AN_ERROR
from trainwarden.events.redis_errors import describe, refusal, transient

log = logging.getLogger(__name__)

BLOCK_MS = 500
BACKOFF_START_S = 0.1
BACKOFF_MAX_S = 5.0


class Outage:
    """One component riding out outages of a service (Redis; Slack for the notifier's sink): the growing pause,
    and one log line when it starts and one, with its duration, when it ends."""

    def __init__(self, name: str, *, service: str = "Redis") -> None:
        self.name = name
        self.service = service
        self.since: float | None = None
        self.backoff = BACKOFF_START_S
        self.refused = False  # Redis answers but refuses writes (OOM, MISCONF, ...): only a write shows it ended

    def failed(self, exc: BaseException) -> float:
        """Note a failed try; returns how long to wait before the next."""
        if self.since is None:
            self.since = time.monotonic()
            log.warning("%s: %s; retrying with backoff", self.name, describe(exc))
        self.refused = isinstance(exc, StoreRefused) or refusal(exc) is not None
        pause = self.backoff
        self.backoff = min(self.backoff * 2, BACKOFF_MAX_S)
        return pause

    def succeeded(self, *, wrote: bool = True) -> None:
        """Note a try that went through; `wrote=False`: it wrote nothing, which does not end a refusal of writes."""
        if self.since is not None and self.refused and not wrote:
            return
        if self.since is not None:
            again = "takes writes" if self.refused else "reachable"
            log.warning("%s: %s %s again after %.1fs", self.name, self.service, again, time.monotonic() - self.since,
                        extra=NOT_AN_ERROR)  # fmt: skip
        self.since = None
        self.backoff = BACKOFF_START_S
        self.refused = False


def run_loop(
    step: Callable[[int | None], int],
    *,
    name: str,
    burst: bool,
    stop: threading.Event | None,
    passing: Callable[[], None] | None = None,
) -> None:
    """Call `step(block_ms)` until `stop` is set; `step` returns how many items it handled.

    With `burst=True`, return as soon as a step handles nothing (and let errors propagate, so a
    test or a one-shot command sees them). Otherwise keep going through Redis outages: every
    transient Redis error (events/redis_errors.py), wrapped as StoreUnavailable or escaping raw.
    `passing` is called after each pass, a failed one included: the loop is alive while it waits out an
    outage (`/healthz` stays 200; `/readyz` says Redis is away).
    """
    stop = stop or threading.Event()
    outage = Outage(name)
    while not stop.is_set():
        try:
            handled = step(None if burst else BLOCK_MS)
        except Exception as exc:
            if burst or not transient(exc):
                raise
            if passing is not None:
                passing()
            stop.wait(outage.failed(exc))
            continue
        if passing is not None:
            passing()
        outage.succeeded(wrote=handled > 0)
        if burst and handled == 0:
            return

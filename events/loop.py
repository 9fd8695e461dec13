"""The loop every consumer daemon runs: step until stopped, back off while Redis is unreachable."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from trainwarden.events.errors import StoreUnavailable

log = logging.getLogger(__name__)

BLOCK_MS = 500
BACKOFF_START_S = 0.1
BACKOFF_MAX_S = 5.0


def run_loop(step: Callable[[int | None], int], *, name: str, burst: bool, stop: threading.Event | None) -> None:
    """Call `step(block_ms)` until `stop` is set; `step` returns how many items it handled.

    With `burst=True`, return as soon as a step handles nothing (and let errors propagate, so a
    test or a one-shot command sees them). Otherwise keep going through Redis outages.
    """
    stop = stop or threading.Event()
    backoff = BACKOFF_START_S
    outage_since: float | None = None
    while not stop.is_set():
        try:
            handled = step(None if burst else BLOCK_MS)
        except StoreUnavailable as exc:
            if burst:
                raise
            if outage_since is None:
                outage_since = time.monotonic()
                log.warning("%s: %s; retrying with backoff", name, exc)
            stop.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)
            continue
        if outage_since is not None:
            log.warning("%s: Redis reachable again after %.1fs", name, time.monotonic() - outage_since)
            outage_since = None
            backoff = BACKOFF_START_S
        if burst and handled == 0:
            return

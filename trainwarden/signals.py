"""Turn SIGTERM / SIGINT into a threading.Event the daemon loops watch."""

from __future__ import annotations

import signal
import threading


def stop_on_signals() -> threading.Event:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop

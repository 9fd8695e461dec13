"""Signals a daemon answers: SIGTERM / SIGINT stop it (a threading.Event its loops watch), SIGHUP reloads
what it can (settings, policy, routes: trainwarden/reload.py) and it goes on, as Prometheus does.

SIGHUP's default action ends a process (exit 129, no log line): every daemon installs a handler, so a
`kill -HUP` meant as "reload" never takes the watchdog down.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger("trainwarden")


def stop_on_signals() -> threading.Event:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def reload_on_sighup(daemon: str, reload: Callable[[], str] | None) -> None:
    """On SIGHUP run `reload` (None: nothing to reload) in a thread of its own, one at a time, and log the
    one line it returns. The handler itself only starts the thread: it may interrupt the main thread anywhere,
    holding any lock, so it does no work there. A reload that raises is logged and the daemon goes on."""
    lock = threading.Lock()

    def run() -> None:
        with lock:
            try:
                said = reload() if reload is not None else "has nothing to reload; going on"
            except Exception as exc:  # a bug in a reload must not end the daemon it was meant to refresh
                log.exception("SIGHUP: the %s's reload failed; going on with what is in force", daemon)
                said = f"reload failed ({type(exc).__name__}: {exc}); going on with what is in force"
        log.warning("SIGHUP: %s %s", daemon, said)

    signal.signal(signal.SIGHUP, lambda *_: threading.Thread(target=run, name="sighup", daemon=True).start())


@contextmanager
def sigint_deferred(held: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold a Ctrl-C (SIGINT) until the block is done, then raise it: for steps that must not be cut in two,
    like starting a run and recording it (cut between, the run would go on unwatched). `held` is called at the
    first Ctrl-C, to say why nothing happens yet. An error the block raises goes on as it is: the step did not
    happen, and its error says so. Main thread only."""
    caught: list[int] = []

    def hold(signum: int, _frame: object) -> None:
        if not caught and held is not None:
            held()
        caught.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt

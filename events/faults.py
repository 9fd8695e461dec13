"""Failpoints: named places where a test can freeze a worker to kill it there (kill -9 tests).

Inactive unless TRAINWARDEN_FAILPOINTS names them (comma-separated). When reached, the point
records the pid of the process that reached it in Redis (so the test knows what to kill) and
blocks; a process nobody kills exits after FROZEN_MAX_S rather than linger.
"""

from __future__ import annotations

import os
import time

from trainwarden.events.keys import Keys
from trainwarden.events.redis_types import Client

ENV_VAR = "TRAINWARDEN_FAILPOINTS"
FROZEN_MAX_S = 120.0


def failpoint(name: str, client: Client, keys: Keys) -> None:
    active = os.environ.get(ENV_VAR)
    if not active or name not in active.split(","):
        return
    client.set(keys.fault(name), os.getpid())
    time.sleep(FROZEN_MAX_S)
    os._exit(70)


_paused: set[str] = set()


def pause_point(name: str, client: Client, keys: Keys) -> None:
    """Like `failpoint`, but the process goes on once the test deletes the key (it acted meanwhile, e.g. an
    archive trimmed the log under a reader). Pauses once per process: a retry passes through."""
    active = os.environ.get(ENV_VAR)
    if not active or name not in active.split(",") or name in _paused:
        return
    _paused.add(name)
    key = keys.fault(name)
    client.set(key, os.getpid())
    deadline = time.monotonic() + FROZEN_MAX_S
    while client.exists(key) and time.monotonic() < deadline:
        time.sleep(0.05)

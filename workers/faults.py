"""Failpoints: named places where a test can freeze a worker to kill it there (kill -9 tests).

Inactive unless TRAINWARDEN_FAILPOINTS names them (comma-separated). When reached, the point
records the worker's pid in Redis (so the test knows) and blocks forever.
"""

from __future__ import annotations

import os
import time

import redis

from events.keys import Keys

ENV_VAR = "TRAINWARDEN_FAILPOINTS"


def failpoint(name: str, client: redis.Redis, keys: Keys) -> None:
    active = os.environ.get(ENV_VAR)
    if not active or name not in active.split(","):
        return
    client.set(keys.fault(name), os.getpid())
    while True:
        time.sleep(3600)

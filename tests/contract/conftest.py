"""The contract suite's backends: a real redis-server, a real 3-master Redis Cluster, the in-memory store.

Each test of tests/contract/ runs once per backend; the Redis ones start from an emptied server.
"""

from __future__ import annotations

import pytest
from trainwarden.events.backend import Backend, RedisBackend
from trainwarden.events.memory import MemoryBackend

BACKENDS = [pytest.param("redis", marks=pytest.mark.redis), pytest.param("cluster", marks=pytest.mark.redis), "memory"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    """One store backend, empty: `store` (tests/conftest.py) on a redis-server, `cstore` on the cluster."""
    if request.param == "memory":
        return MemoryBackend()
    return RedisBackend(request.getfixturevalue("store" if request.param == "redis" else "cstore"))

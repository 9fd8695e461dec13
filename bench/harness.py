"""Shared bench plumbing: a private redis-server and best-of-N timing."""

from __future__ import annotations

import math
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainwarden.tools.redis_server import RedisServer


@contextmanager
def private_redis() -> Iterator[RedisServer]:
    with tempfile.TemporaryDirectory(prefix="tw-bench-") as d, RedisServer(Path(d)) as server:
        yield server


def best_of(repeats: int, setup: Callable[[], None], work: Callable[[], int]) -> float:
    """Highest items/second over `repeats` runs of `work` (which returns the item count)."""
    best = 0.0
    for _ in range(repeats):
        setup()
        start = time.perf_counter()
        n = work()
        elapsed = time.perf_counter() - start
        best = max(best, n / elapsed)
    return best


def percentile(values: list[float], q: float) -> float:
    """The value at quantile `q` of `values` (nearest rank); NaN for none."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else math.nan


def sid_seconds(sid: bytes | str) -> float:
    """The Redis clock time (seconds) a stream id was assigned at."""
    text = sid.decode() if isinstance(sid, bytes) else sid
    return int(text.split("-", 1)[0]) / 1000.0

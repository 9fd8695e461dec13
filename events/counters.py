"""The process's counters and gauges for the Prometheus endpoint (trainwarden/metrics_server.py).

Plain dicts behind a lock, so any package may bump one (`count("slack_posts")`) without importing
prometheus-client, which only the endpoint needs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

Labels = tuple[tuple[str, str], ...]
COUNTERS: dict[str, dict[Labels, float]] = {}
GAUGES: dict[str, dict[Labels, float]] = {}
_lock = threading.Lock()


def count(name: str, amount: float = 1, **labels: str) -> None:
    """Add to a process counter (`name` without prefix, e.g. `slack_posts`)."""
    key = tuple(sorted(labels.items()))
    with _lock:
        counter = COUNTERS.setdefault(name, {})
        counter[key] = counter.get(key, 0.0) + amount


def gauge(name: str, value: float, **labels: str) -> None:
    """Set a process gauge (e.g. `last_post_timestamp`)."""
    with _lock:
        GAUGES.setdefault(name, {})[tuple(sorted(labels.items()))] = value


def counters() -> Iterator[tuple[str, Labels, float]]:
    with _lock:
        items = [(n, k, v) for n, c in COUNTERS.items() for k, v in c.items()]
    yield from items


def gauges() -> Iterator[tuple[str, Labels, float]]:
    with _lock:
        items = [(n, k, v) for n, g in GAUGES.items() for k, v in g.items()]
    yield from items

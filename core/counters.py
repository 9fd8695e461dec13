"""The process's counters, gauges and histograms for the Prometheus endpoint (trainwarden/metrics_server.py).

Plain dicts behind a lock, so any package may bump one (`count("slack_posts")`) without importing
prometheus-client, which only the endpoint needs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

Labels = tuple[tuple[str, str], ...]
COUNTERS: dict[str, dict[Labels, float]] = {}
GAUGES: dict[str, dict[Labels, float]] = {}


@dataclass
class Histogram:
    """One label set's observations: a count per bucket (upper bounds, then +Inf) and their sum."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = self.counts or [0] * (len(self.bounds) + 1)

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus' buckets: (le, observations at or below it), +Inf last."""
        out, running = [], 0
        for le, n in zip([*map(str, self.bounds), "+Inf"], self.counts, strict=True):
            running += n
            out.append((le, float(running)))
        return out


HISTOGRAMS: dict[str, dict[Labels, Histogram]] = {}
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


def observe(name: str, value: float, bounds: Sequence[float], **labels: str) -> None:
    """Add an observation to a process histogram with these bucket bounds (ascending; e.g. a latency)."""
    key = tuple(sorted(labels.items()))
    with _lock:
        hist = HISTOGRAMS.setdefault(name, {}).setdefault(key, Histogram(tuple(bounds)))
        hist.counts[next((i for i, b in enumerate(hist.bounds) if value <= b), len(hist.bounds))] += 1
        hist.total += value


def counters() -> Iterator[tuple[str, Labels, float]]:
    with _lock:
        items = [(n, k, v) for n, c in COUNTERS.items() for k, v in c.items()]
    yield from items


def gauges() -> Iterator[tuple[str, Labels, float]]:
    with _lock:
        items = [(n, k, v) for n, g in GAUGES.items() for k, v in g.items()]
    yield from items


def histograms() -> Iterator[tuple[str, Labels, Histogram]]:
    """A copy of each histogram, so a scrape reads consistent counts while workers observe."""
    with _lock:
        items = [(n, k, Histogram(h.bounds, list(h.counts), h.total))
                 for n, by in HISTOGRAMS.items() for k, h in by.items()]  # fmt: skip
    yield from items

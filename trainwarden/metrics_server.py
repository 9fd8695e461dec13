"""The Prometheus endpoint each daemon may serve (`--metrics-port`, off by default).

One registry per process (never the global one) with one collector that reads, at scrape time, the
process's own counters (events/heartbeat.py: Slack posts, decisions, stops) and heartbeat, and a few
cheap Redis reads every daemon can answer: the feed's groups (lag, pending), dead letters, RQ's queue,
and the age of every component's heartbeat. So any one daemon's endpoint shows the others' silence:
an alert on `trainwarden_component_up == 0` fires while the notifier itself is down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from trainwarden.errors import ConfigError
from trainwarden.events import counters
from trainwarden.events import heartbeat as hb
from trainwarden.events.heartbeat import Heartbeat
from trainwarden.events.keys import Keys
from trainwarden.extras import require

log = logging.getLogger(__name__)

PREFIX = "trainwarden"
HOST = "127.0.0.1"
# The process counters by role, with their labels: listed (at 0) before anything is counted.
DECLARED: dict[str, dict[str, list[str]]] = {
    "worker": {"decisions": ["rule", "decision"], "stop_requests": ["rule"], "stops": ["outcome"]},
    "notifier": {"slack_posts": [], "slack_post_failures": ["error"]},
}


@dataclass
class Sources:
    """What this process's endpoint reads."""

    client: Any  # the event log's Redis
    keys: Keys
    heartbeat: Heartbeat
    queue_length: Callable[[], int] | None = None  # RQ's queue, where the process has one
    jobs: Callable[[], dict[str, int]] | None = None  # this worker's jobs by outcome


def collect(sources: Sources) -> Iterator[Any]:
    """The metric families for one scrape (prometheus-client's Collector protocol)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    beat = sources.heartbeat
    families: dict[str, Any] = {}

    def family(kind: type, name: str, doc: str, labels: list[str]) -> Any:
        if name not in families:
            families[name] = kind(f"{PREFIX}_{name}", doc, labels=labels)
        return families[name]

    lag = family(GaugeMetricFamily, "lag_seconds", "this daemon's lag (feed lag, queue wait, spool backlog)",
                 ["role", "host", "of"])  # fmt: skip
    lag.add_metric([beat.role, beat.host, beat.lag_of], beat.lag_s or 0.0)
    if beat.role == "agent":
        family(GaugeMetricFamily, "spool_bytes", "bytes of events waiting in the agent's spool", ["host"]).add_metric(
            [beat.host], float(beat.backlog or 0)
        )
    for name, names in DECLARED.get(beat.role, {}).items():
        family(CounterMetricFamily, name, name.replace("_", " "), names)
    for kind, items in ((CounterMetricFamily, counters.counters()), (GaugeMetricFamily, counters.gauges())):
        for name, labels, value in items:
            found = family(kind, name, name.replace("_", " "), [k for k, _ in labels])
            given = dict(labels)  # in the order of the family's label names (a declared family has its own)
            found.add_metric([given.get(label, "") for label in found._labelnames], value)
    up = family(GaugeMetricFamily, "redis_up", "1 when this scrape could read Redis", [])
    try:
        _redis_metrics(sources, family)
        up.add_metric([], 1.0)
    except Exception as exc:  # a scrape never fails: it says Redis could not be read
        log.debug("metrics: Redis not readable: %s", exc)
        up.add_metric([], 0.0)
    yield from families.values()


def _redis_metrics(sources: Sources, family: Callable[..., Any]) -> None:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    r, keys, now = sources.client, sources.keys, time.time()
    age = family(GaugeMetricFamily, "heartbeat_age_seconds", "seconds since each component's last heartbeat",
                 ["component", "role", "host"])  # fmt: skip
    alive = family(GaugeMetricFamily, "component_up", "0 when a component sent no heartbeat for 3 of its intervals",
                   ["component", "role", "host"])  # fmt: skip
    for b in hb.read_beats(r, keys):
        age.add_metric([b.component, b.role, b.host], b.age(now))
        alive.add_metric([b.component, b.role, b.host], 0.0 if b.silent(now) else 1.0)
    pending = family(GaugeMetricFamily, "feed_pending_entries", "feed entries read but not yet done, per group",
                     ["group"])  # fmt: skip
    lag = family(GaugeMetricFamily, "feed_lag_entries", "feed entries not yet read, per group", ["group"])
    try:
        groups = r.xinfo_groups(keys.feed())
    except Exception:  # no feed yet
        groups = []
    for g in groups:
        name = g["name"].decode() if isinstance(g["name"], bytes) else str(g["name"])
        pending.add_metric([name], float(g.get("pending") or 0))
        lag.add_metric([name], float(g.get("lag") or 0))
    family(GaugeMetricFamily, "dead_letters", "entries that could not be decoded (trainwarden dead-letters)",
           []).add_metric([], float(r.xlen(keys.dead_letters())))  # fmt: skip
    if sources.queue_length is not None:
        family(GaugeMetricFamily, "jobs_queued", "jobs waiting in RQ's queue", []).add_metric(
            [], float(sources.queue_length())
        )
    if sources.jobs is not None:
        jobs = family(CounterMetricFamily, "jobs", "jobs this worker ran, by outcome", ["outcome"])
        for outcome, n in sources.jobs().items():
            jobs.add_metric([outcome], float(n))


def serve(command: str, sources: Sources, *, port: int, host: str = HOST) -> None:
    """Start the endpoint in a background thread (MissingExtra without prometheus-client)."""
    require(command, "prometheus_client")
    from prometheus_client import CollectorRegistry, start_http_server

    class _Collector:
        def collect(self) -> Iterator[Any]:
            return collect(sources)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    try:
        start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigError(f"--metrics-port {port}: cannot listen on {host}:{port}: {exc.strerror}") from None
    log.info("Prometheus metrics on http://%s:%d/metrics", host, port)

"""The Prometheus endpoint each daemon may serve (`--metrics-port`, off by default).

One registry per process (never the global one) with one collector that reads, at scrape time, the
process's own counters (events/heartbeat.py: Slack posts, decisions, stops) and heartbeat, and a few
cheap Redis reads every daemon can answer: the feed's groups (lag, pending), dead letters, RQ's queue,
and the age of every component's heartbeat. So any one daemon's endpoint shows the others' silence:
an alert on `trainwarden_component_up == 0` fires while the notifier itself is down.

Present from the first scrape, before any event: the process counters with every label set known at
start (each rule of the policy, each outcome) at 0, and the worker's `decision_latency_seconds` histogram (per
decision) empty, so a dashboard's `rate()` and an alert have a series to read; `trainwarden_build_info{version,
python}`; and prometheus-client's process, platform (`python_info`) and gc collectors. Paths: `/metrics`, `/healthz`
and `/readyz` (trainwarden/probes.py); any other path is a 404, so a typo in a scrape config shows instead of
scraping the wrong page.
"""

from __future__ import annotations

import logging
import platform
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from trainwarden import probes
from trainwarden.core import counters
from trainwarden.core.errors import ConfigError
from trainwarden.events import heartbeat as hb
from trainwarden.events import latency
from trainwarden.events import types as t
from trainwarden.events.health import not_ready
from trainwarden.events.heartbeat import Heartbeat
from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import describe
from trainwarden.events.stats import dead_letter_count, feed_groups
from trainwarden.extras import require
from trainwarden.policies.model import DECISIONS

log = logging.getLogger(__name__)

PREFIX = "trainwarden"
HOST = "127.0.0.1"
# The process counters by role, with their labels: listed (at 0) before anything is counted.
DECLARED: dict[str, dict[str, list[str]]] = {
    "worker": {"decisions": ["rule", "decision"], "stop_requests": ["rule"], "stops": ["outcome"]},
    "notifier": {"slack_posts": [], "slack_post_failures": ["error"]},
}
HISTOGRAM_DOCS = {latency.DECISION_LATENCY: "seconds from an event's timestamp to the decision it caused, committed"}
STOP_OUTCOMES = tuple(kind.rpartition(".")[2] for kind in (t.STOP_DONE, t.STOP_FAILED))
SLACK_ERRORS = ("SlackRejected", "SlackUnavailable")  # bot/errors.py: what a post raises (others are counted too)


@dataclass
class Sources:
    """What this process's endpoint reads."""

    client: Any  # the event log's Redis
    keys: Keys
    heartbeat: Heartbeat
    queue_length: Callable[[], int] | None = None  # RQ's queue, where the process has one
    jobs: Callable[[], dict[str, int]] | None = None  # this worker's jobs by outcome
    rules: Callable[[], Sequence[str]] | None = None  # the policy's rule ids (the worker's counters' label sets)
    max_lag_s: float = probes.READY_MAX_LAG_S  # `/readyz`: lag above this is not ready


def initial_series(role: str, rules: Iterable[str]) -> Iterator[tuple[str, counters.Labels]]:
    """Pure: the label sets of the role's process counters known before anything is counted (listed at 0)."""
    if role == "worker":
        for rule in rules:
            for decision in DECISIONS:
                yield "decisions", (("decision", decision), ("rule", rule))
            yield "stop_requests", (("rule", rule),)
        for outcome in STOP_OUTCOMES:
            yield "stops", (("outcome", outcome),)
    elif role == "notifier":
        yield "slack_posts", ()
        for error in SLACK_ERRORS:
            yield "slack_post_failures", (("error", error),)


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
    family(GaugeMetricFamily, "build_info", "1, labelled with the trainwarden and Python versions this daemon runs",
           ["version", "python"]).add_metric([beat.version, platform.python_version()], 1.0)  # fmt: skip
    for name, names in DECLARED.get(beat.role, {}).items():
        family(CounterMetricFamily, name, name.replace("_", " "), names)
    counted = list(counters.counters())
    seen = {(name, labels) for name, labels, _ in counted}
    zeros = [(name, labels, 0.0) for name, labels in initial_series(beat.role, sources.rules() if sources.rules else ())
             if (name, labels) not in seen]  # fmt: skip
    for kind, items in ((CounterMetricFamily, [*zeros, *counted]), (GaugeMetricFamily, list(counters.gauges()))):
        for name, labels, value in items:
            found = family(kind, name, name.replace("_", " "), [k for k, _ in labels])
            given = dict(labels)  # in the order of the family's label names (a declared family has its own)
            found.add_metric([given.get(label, "") for label in found._labelnames], value)
    _histograms(beat.role, family)
    up = family(GaugeMetricFamily, "redis_up", "1 when this scrape could read Redis", [])
    try:
        _redis_metrics(sources, family)
        up.add_metric([], 1.0)
    except Exception as exc:  # a scrape never fails: it says Redis could not be read
        log.debug("metrics: Redis not readable: %s", exc)
        up.add_metric([], 0.0)
    yield from families.values()


def _histograms(role: str, family: Callable[..., Any]) -> None:
    """The process's histograms; a worker's decision latency by decision at 0 until its first decision."""
    from prometheus_client.core import HistogramMetricFamily

    found = {(name, labels): hist for name, labels, hist in counters.histograms()}
    if role == "worker":
        for decision in DECISIONS:
            found.setdefault((latency.DECISION_LATENCY, (("decision", decision),)), counters.Histogram(latency.BUCKETS))
    for (name, labels), hist in found.items():
        doc = HISTOGRAM_DOCS.get(name, name.replace("_", " "))
        family(HistogramMetricFamily, name, doc, [k for k, _ in labels]).add_metric(
            [v for _, v in labels], hist.cumulative(), sum_value=hist.total
        )


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
    for g in feed_groups(r, keys):
        pending.add_metric([g.name], float(g.pending))
        lag.add_metric([g.name], float(g.lag))
    family(GaugeMetricFamily, "dead_letters", "entries that could not be decoded (trainwarden dead-letters)",
           []).add_metric([], float(dead_letter_count(r, keys)))  # fmt: skip
    if sources.queue_length is not None:
        family(
            GaugeMetricFamily, "jobs_queued", "jobs waiting in RQ's queues (the fast lane and the normal one)", []
        ).add_metric([], float(sources.queue_length()))
    if sources.jobs is not None:
        jobs = family(CounterMetricFamily, "jobs", "jobs this worker ran, by outcome", ["outcome"])
        for outcome, n in sources.jobs().items():
            jobs.add_metric([outcome], float(n))


def probe(path: str, sources: Sources) -> probes.Verdict:
    """`/healthz` or `/readyz` for this process (one PING to Redis for the latter)."""
    beat = sources.heartbeat
    if path == "/healthz":
        return probes.health(beat, stale_s=beat.stale_s())
    failed = not_ready(sources.client)  # any failure to answer is "not ready", said in words
    error = None if failed is None else describe(failed)
    return probes.readiness(beat, redis_error=error, max_lag_s=sources.max_lag_s)


def app(registry: Any, sources: Sources) -> Callable[..., Iterable[bytes]]:
    """The WSGI app: prometheus-client's for `/metrics` (content negotiation, gzip), the probes, else 404."""
    from prometheus_client import make_wsgi_app

    metrics = make_wsgi_app(registry)

    def route(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == "/metrics":
            return metrics(environ, start_response)
        if path in ("/healthz", "/readyz"):
            verdict = probe(path, sources)
            status, body = f"{verdict.status} {'OK' if verdict.ok else 'Service Unavailable'}", verdict.reason
        else:
            status, body = "404 Not Found", f"no such page {path!r}: /metrics, /healthz or /readyz"
        start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store")])
        return [f"{body}\n".encode()]

    return route


class _Server(ThreadingMixIn, WSGIServer):
    """One thread per request (a slow scrape never holds up a probe); the threads end with the process."""

    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes and probes every few seconds: not logged."""


def serve(command: str, sources: Sources, *, port: int, host: str = HOST) -> WSGIServer:
    """Start the endpoint in a background thread (MissingExtra without prometheus-client)."""
    require(command, "prometheus_client")
    from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

    class _Collector:
        def collect(self) -> Iterator[Any]:
            return collect(sources)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    ProcessCollector(registry=registry)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
    PlatformCollector(registry=registry)  # python_info
    GCCollector(registry=registry)  # python_gc_*
    try:
        server_class = _Server6 if ":" in host else _Server
        server = make_server(host, port, app(registry, sources), server_class=server_class, handler_class=_Quiet)
    except OSError as exc:
        raise ConfigError(f"--metrics-port {port}: cannot listen on {host}:{port}: {exc.strerror}") from None
    threading.Thread(target=server.serve_forever, name=f"metrics-{command}", daemon=True).start()
    log.info("Prometheus metrics on http://%s:%d/metrics (and /healthz, /readyz)", host, port)
    return server

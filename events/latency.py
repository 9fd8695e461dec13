"""How long a person waits for trainwarden: from an event's timestamp (its line read on the GPU server) to the
decision it caused, committed by the worker. The Prometheus histogram `trainwarden_decision_latency_seconds`
(trainwarden/metrics_server.py), by decision, is observed here.

A small pure step and one call, from `count_outputs` where the worker commits decisions, so that the worker's
job may change shape (batched commits) without moving the measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from trainwarden.core.counters import observe
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.payloads import DecisionData
from trainwarden.events.store import Malformed

DECISION_LATENCY = "decision_latency_seconds"
# Seconds, the upper bounds Grafana's heatmaps and histogram_quantile read: the 1 s target in the middle.
BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def decision_latencies(
    outputs: Sequence[Event], inputs: Sequence[tuple[str, Event | Malformed]], *, now: float
) -> list[tuple[str, float]]:
    """Pure: (decision, seconds from its triggering input's timestamp to `now`) for each decision among `outputs`
    whose trigger is among `inputs`. A host's clock ahead of the worker's gives 0, not a negative time."""
    decisions = [cast(DecisionData, e.data) for e in outputs if e.type == t.DECISION]
    if not decisions:
        return []
    ts = {e.id: e.ts for _, e in inputs if not isinstance(e, Malformed)}
    return [(str(d.get("decision")), max(0.0, now - ts[d["trigger"]])) for d in decisions if d.get("trigger") in ts]


def observe_decisions(outputs: Sequence[Event], inputs: Sequence[tuple[str, Event | Malformed]], *, now: float) -> None:
    """Observe each decision's latency in the process's histogram."""
    for decision, seconds in decision_latencies(outputs, inputs, now=now):
        observe(DECISION_LATENCY, seconds, BUCKETS, decision=decision)

"""`/healthz` and `/readyz` verdicts (pure), and the counters' label sets listed before anything is counted."""

from __future__ import annotations

import time

from trainwarden.events.heartbeat import Heartbeat
from trainwarden.events.keys import Keys

from trainwarden import probes
from trainwarden.metrics_server import initial_series


def heartbeat(**fields: object) -> Heartbeat:
    beat = Heartbeat(client=None, keys=Keys(), role="dispatcher", host="h1", version="1.0", interval_s=2.0)
    for name, value in fields.items():
        setattr(beat, name, value)
    return beat


def test_a_loop_without_a_pass_for_three_intervals_is_not_alive() -> None:
    beat = heartbeat()
    assert beat.stale_s() is None and probes.health(beat, stale_s=None).status == 200
    beat.passed = time.monotonic() - 7.0  # 3 intervals of 2 s: 6 s
    stale = beat.stale_s()
    assert stale is not None and stale >= 7.0
    verdict = probes.health(beat, stale_s=stale)
    assert verdict.status == 503 and verdict.reason.startswith("dispatcher@h1: its loop made no pass for 7.")
    beat.passing()
    assert beat.stale_s() is None


def test_ready_needs_redis_a_running_daemon_and_a_lag_within_the_bound() -> None:
    ok = probes.readiness(heartbeat(lag_s=3.0), redis_error=None, max_lag_s=60)
    assert (ok.status, ok.reason) == (200, "dispatcher@h1: ready (Redis answers, lag 3.0s within 60s)")
    away = probes.readiness(heartbeat(), redis_error="connection refused", max_lag_s=60)
    assert away.status == 503 and "Redis does not answer (connection refused)" in away.reason
    behind = probes.readiness(heartbeat(lag_s=75.0, lag_of="feed lag"), redis_error=None, max_lag_s=60)
    assert (behind.status, behind.reason) == (503, "dispatcher@h1: behind: feed lag 75.0s over the bound 60s")
    stopping = probes.readiness(heartbeat(stopped_at=1.0), redis_error=None, max_lag_s=60)
    assert (stopping.status, stopping.reason) == (503, "dispatcher@h1: stopping")


def test_label_sets_known_at_start() -> None:
    worker = list(initial_series("worker", ["nan_loss", "stall"]))
    assert ("decisions", (("decision", "STOP"), ("rule", "nan_loss"))) in worker
    assert ("decisions", (("decision", "WAIT"), ("rule", "stall"))) in worker
    assert ("stop_requests", (("rule", "stall"),)) in worker
    assert [labels for name, labels in worker if name == "stops"] == [(("outcome", "done"),), (("outcome", "failed"),)]
    notifier = list(initial_series("notifier", ["ignored"]))
    assert notifier[0] == ("slack_posts", ()) and ("slack_post_failures", (("error", "SlackRejected"),)) in notifier
    assert list(initial_series("agent", ["nan_loss"])) == []

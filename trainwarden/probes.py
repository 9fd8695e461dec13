"""What `/healthz` and `/readyz` answer (pure): alive, and ready to do its work now.

Two questions a supervisor asks differently. `/healthz` (liveness): the daemon's loop made a pass
within `SILENT_INTERVALS` heartbeat intervals; a Redis outage does not fail it, since the loop is
alive while it waits Redis out, and restarting it would not bring Redis back. `/readyz` (readiness):
Redis answers, the daemon was not stopped, and its lag (the dispatcher's feed lag, the worker's
queue wait, the agent's spool backlog, the notifier's feed lag) is within `max_lag_s`: a load
balancer, a compose healthcheck or an alert uses it to tell "up" from "doing its job".
"""

from __future__ import annotations

from dataclasses import dataclass

from trainwarden.events.heartbeat import SILENT_INTERVALS, Heartbeat

READY_MAX_LAG_S = 60.0  # default: a daemon this far behind is not ready (`--ready-max-lag`)


@dataclass(frozen=True, slots=True)
class Verdict:
    """An HTTP status and the one line that says why (the response body)."""

    ok: bool
    reason: str

    @property
    def status(self) -> int:
        return 200 if self.ok else 503


def health(heartbeat: Heartbeat, *, stale_s: float | None) -> Verdict:
    """Liveness from the loop's last pass (`stale_s`: `Heartbeat.stale_s()`, None when recent)."""
    if stale_s is not None:
        bound = SILENT_INTERVALS * heartbeat.interval_s
        return Verdict(False, f"{heartbeat.component}: its loop made no pass for {stale_s:.1f}s (bound {bound:g}s); "
                              "a hung loop: restart it, and look at its log for what it waits on")  # fmt: skip
    return Verdict(True, f"{heartbeat.component}: alive")


def readiness(heartbeat: Heartbeat, *, redis_error: str | None, max_lag_s: float) -> Verdict:
    """Readiness: Redis answered (`redis_error` None), not stopped, and lag within `max_lag_s`."""
    who = heartbeat.component
    if redis_error is not None:
        return Verdict(False, f"{who}: Redis does not answer ({redis_error}); it waits for Redis and goes on")
    if heartbeat.stopped_at is not None:
        return Verdict(False, f"{who}: stopping")
    lag = heartbeat.lag_s or 0.0
    if lag > max_lag_s:
        what = heartbeat.lag_of or "lag"
        return Verdict(False, f"{who}: behind: {what} {lag:.1f}s over the bound {max_lag_s:g}s")
    return Verdict(True, f"{who}: ready (Redis answers, lag {lag:.1f}s within {max_lag_s:g}s)")

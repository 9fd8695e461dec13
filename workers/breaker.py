"""The stop breaker: past `max_stops` policy STOPs carried out within `window_s`, across all runs, the next ones
are held for a person (Release / Cancel) instead of carried out, as a PodDisruptionBudget bounds evictions.

A policy edit with a wrong threshold, reloaded by SIGHUP, would otherwise stop every healthy run within a
minute. The breaker sits where a STOP is carried out (workers/performers.py), so the evaluation stays pure and
`replay --verify` unchanged: the decision and its request are recorded as the policy made them, and a
`stop.held` records that the workers did not act on it. Never held: a person's stop (Slack, CLI, MCP, a
Release), and the STOPs of fault rules (NaN, a crash in the log): one run's loss=nan is not a mass stop.
The count and the held list live in Redis (events/breaker.py), shared by every worker.
"""

from __future__ import annotations

from typing import cast

from trainwarden.events import breaker
from trainwarden.events.envelope import Event
from trainwarden.events.payloads import StopHeldData, StopRequestedData
from trainwarden.policies.model import Policy
from trainwarden.workers.config import BreakerSettings
from trainwarden.workers.context import WorkerContext


def gated(request: StopRequestedData, policy: Policy, settings: BreakerSettings) -> bool:
    """Whether the breaker may hold this stop request (pure): a policy's STOP from a rule that is no fault rule."""
    if settings.max_stops <= 0 or request.get("by") != "policy":
        return False
    rule = next((r for r in policy.rules if r.id == request.get("rule")), None)
    return rule is None or not rule.fault


def check(ctx: WorkerContext, request: Event, *, run_host: str, now: float) -> StopHeldData | None:
    """None when the stop `request` may be carried out (counted in the window if gated); else what `stop.held`
    records, the run put on the held list."""
    asked = cast(StopRequestedData, request.data)
    settings = ctx.breaker
    if not gated(asked, ctx.policies.policy, settings):
        if asked.get("by") != "policy":  # a person's stop settles the run's held one (Release, /stop, the CLI)
            breaker.settle(ctx.redis, ctx.store.keys, request.run)
        return None
    admission = breaker.admit(ctx.redis, ctx.store.keys, request=request.id, now=now, window_s=settings.window_s,
                              limit=settings.max_stops)  # fmt: skip
    if admission.admitted:
        return None
    held: StopHeldData = {"request": request.id, "decision": asked.get("decision"), "rule": asked.get("rule"),
                          "reason": asked.get("reason"), "stops": admission.stops, "max_stops": settings.max_stops,
                          "window_s": settings.window_s, "run_host": run_host}  # fmt: skip
    breaker.hold(ctx.redis, ctx.store.keys, request.run, {**held, "ts": now})
    return held

"""The stop breaker: past its limit of policy STOPs carried out within `window_s`, across all runs, the next ones
are held for a person (Release / Cancel) instead of carried out, as a PodDisruptionBudget bounds evictions. The
limit is the larger of `max_stops` and `max_share` of the running runs (`limit`). And a rule first loaded within
`new_rule_grace_s` does not stop a run that was healthy a moment before at all, limit or not (`new_rule`): one
wrong new rule should not take even three healthy runs.

A policy edit with a wrong threshold, reloaded by SIGHUP, would otherwise stop every healthy run within a
minute. The breaker sits where a STOP is carried out (workers/performers.py), so the evaluation stays pure and
`replay --verify` unchanged: the decision and its request are recorded as the policy made them, and a
`stop.held` records that the workers did not act on it. Never held: a person's stop (Slack, CLI, MCP, a
Release), and the STOPs of fault rules (NaN, a crash in the log): one run's loss=nan is not a mass stop.
The count, the rules' first loads and the held list live in Redis (events/breaker.py), shared by every worker.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

from trainwarden.events import breaker
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.payloads import StopHeldData, StopRequestedData
from trainwarden.events.projection import RunState
from trainwarden.events.run_view import run_states
from trainwarden.events.store import EventStore, Malformed
from trainwarden.policies.model import Policy, Rule
from trainwarden.workers.config import BREAKER_RUNNING_CACHE_S, BreakerSettings
from trainwarden.workers.context import WorkerContext
from trainwarden.workers.preview import DAY_S

RUNNING = ("launched", "running", "stopping")  # statuses of a run the share counts
ENDS = (t.RUN_FINISHED, t.RUN_FAILED, t.STOP_CANCELLED)  # a held STOP with one of these after it is settled


def _rule(request: StopRequestedData, policy: Policy) -> Rule | None:
    return next((r for r in policy.rules if r.id == request.get("rule")), None)


def gated(request: StopRequestedData, policy: Policy, settings: BreakerSettings) -> bool:
    """Whether the breaker may hold this stop request (pure): a policy's STOP from a rule that is no fault rule."""
    if settings.max_stops <= 0 or request.get("by") != "policy":
        return False
    rule = _rule(request, policy)
    return rule is None or not rule.fault


def limit(settings: BreakerSettings, running: int) -> int:
    """Policy STOPs carried out within the window before the next is held (pure): `max_stops`, or `max_share` of
    the `running` runs (rounded down: at most that share) when that is more."""
    share = math.floor(settings.max_share * running + 1e-9) if settings.max_share > 0 else 0
    return max(settings.max_stops, share)


def new_rule(first_loaded: float | None, *, now: float, grace_s: float) -> bool:
    """Whether a rule first loaded at `first_loaded` is still new at `now` (pure); None (never noted: a policy
    built in code) and 0 (the first policy the workers ever loaded) are not new."""
    return grace_s > 0 and bool(first_loaded) and now - cast(float, first_loaded) < grace_s


def healthy_before(state: RunState, rule: str) -> bool:
    """Whether the run was healthy a moment before `rule`'s STOP (pure): no other anomaly open on it."""
    return not set(state.open_anomalies) - {rule}


def counts(state: RunState, *, stopped_since: float) -> bool:
    """Whether the share counts the run (pure): launched, running or being stopped, or stopped since
    `stopped_since` (the window's start): the share is of the runs running when the burst began, so that the
    stops it lets through do not lower it as they are carried out."""
    if state.status in RUNNING:
        return True
    return state.status == "stopped" and bool(state.stops) and float(state.stops[-1].get("ts") or 0) >= stopped_since


def count_running(store: EventStore, *, stopped_since: float) -> int:
    """The runs the share counts (`counts`) among those active within a day of the newest (the reload's backtest
    looks at the same ones: workers/preview.py); one pipelined read of their views."""
    runs = [(run, ts) for run, ts in store.runs() if run != t.SYSTEM_RUN]
    newest = max((ts for _, ts in runs), default=0.0)
    recent = [run for run, ts in runs if newest - ts <= DAY_S]
    return sum(1 for state in run_states(store, recent).values() if counts(state, stopped_since=stopped_since))


def running(ctx: WorkerContext, *, now: float) -> int:
    """The share's base (`count_running`), counted at most once in `BREAKER_RUNNING_CACHE_S` by any worker."""
    kept = breaker.running_cached(ctx.redis, ctx.store.keys)
    if kept is not None:
        return kept
    counted = count_running(ctx.store, stopped_since=now - ctx.breaker.window_s)
    breaker.keep_running(ctx.redis, ctx.store.keys, counted, ttl_s=BREAKER_RUNNING_CACHE_S)
    return counted


def check(ctx: WorkerContext, request: Event, state: RunState, *, run_host: str, now: float) -> StopHeldData | None:
    """None when the stop `request` may be carried out (counted in the window if gated); else what `stop.held`
    records, the run put on the held list. `state`: the run's, as the evaluation left it."""
    asked = cast(StopRequestedData, request.data)
    settings, keys = ctx.breaker, ctx.store.keys
    if not gated(asked, ctx.policies.policy, settings):
        # carried out: a person's stop (Release, /stop, the CLI) or a fault's settles the run's held one
        breaker.settle(ctx.redis, keys, request.run)
        return None
    held: StopHeldData = {"request": request.id, "decision": asked.get("decision"), "rule": asked.get("rule"),
                          "reason": asked.get("reason"), "stops": 0, "max_stops": settings.max_stops,
                          "window_s": settings.window_s, "run_host": run_host}  # fmt: skip
    rule = _rule(asked, ctx.policies.policy)
    if rule is not None and settings.new_rule_grace_s > 0 and healthy_before(state, rule.id):
        first = breaker.first_loaded(ctx.redis, keys, rule.definition)
        if new_rule(first, now=now, grace_s=settings.new_rule_grace_s):
            held["new_rule_s"], held["grace_s"] = now - cast(float, first), settings.new_rule_grace_s
            held["stops"] = breaker.recent(ctx.redis, keys, now=now, window_s=settings.window_s)
            breaker.hold(ctx.redis, keys, request.run, {**held, "ts": now})
            return held
    most = limit(settings, running(ctx, now=now) if settings.max_share > 0 else 0)
    admission = breaker.admit(ctx.redis, keys, request=request.id, now=now, window_s=settings.window_s, limit=most)
    if admission.admitted:
        return None
    held["stops"], held["limit"] = admission.stops, most
    breaker.hold(ctx.redis, keys, request.run, {**held, "ts": now})
    return held


def why(held: StopHeldData) -> str:
    """The worker's log line's reason for a hold."""
    if "new_rule_s" in held:
        return (f"its rule was first loaded {held['new_rule_s']:.0f}s ago, within the new-rule grace of "
                f"{held.get('grace_s', 0):g}s, and the run was healthy")  # fmt: skip
    return f"{held['stops']} policy stops within {held['window_s']:g}s, limit {held.get('limit', held['max_stops'])}"


def settle_ended(ctx: WorkerContext, entries: Sequence[tuple[str, Event | Malformed]]) -> None:
    """A held run that ended, or whose STOP a person cancelled, leaves the held list (the entries just evaluated)."""
    for run in {e.run for _, e in entries if isinstance(e, Event) and e.type in ENDS}:
        breaker.settle(ctx.redis, ctx.store.keys, run)

"""/status: each run's state read from the projections (the run view of events/run_view.py, and a
plan's fold), rendered one line per run."""

from __future__ import annotations

import time
from typing import cast

from trainwarden.bot import messages, replies
from trainwarden.bot.stages import SYSTEM_RUN
from trainwarden.events import types as t
from trainwarden.events.metrics import first_of
from trainwarden.events.payloads import PlanStartedData
from trainwarden.events.projection import RunState, is_finite_number
from trainwarden.events.redis_types import stream_entries
from trainwarden.events.run_view import run_state
from trainwarden.events.store import EventStore, Malformed, decode_entries, redis_errors
from trainwarden.policies.durations import fmt_duration
from trainwarden.remote.plan import PLAN_PREFIX, fold_plan

ACTIVE = frozenset({"launched", "running", "stopping"})
GPU_SCAN = 500  # entries read back to find the last gpu sample
GPU_KEYS = ("util", "gpu_util", "utilization")
SPARK_POINTS = 12


def known_runs(store: EventStore) -> list[str]:
    return [run for run, _ in store.runs() if run != SYSTEM_RUN]


def last_gpu_util(store: EventStore, run: str) -> float | None:
    with redis_errors("read a run's recent events", run=run):
        entries = stream_entries(store.redis.xrevrange(store.keys.log(run), count=GPU_SCAN))
    for _sid, item in decode_entries(entries, run):
        if isinstance(item, Malformed) or item.type != t.GPU:
            continue
        for key in GPU_KEYS:
            if is_finite_number(item.data.get(key)):
                return float(item.data[key])
    return None


def loss_values(state: RunState) -> list[float]:
    out = [first_of(m, "loss") for m in state.recent_metrics]
    return [float(v) for v in out if isinstance(v, int | float) and not isinstance(v, bool)][-SPARK_POINTS:]


def progress(state: RunState) -> str:
    """Step / total steps (from the experiment, recorded at launch), else epochs, else the step."""
    total, epochs = state.launch.get("total_steps"), state.launch.get("epochs")
    if isinstance(total, int) and total > 0 and state.step is not None:
        return messages.progress_bar(state.step, total)
    epoch = state.last_metrics.get("epoch")
    if isinstance(epoch, int | float) and isinstance(epochs, int) and epochs > 0:
        return messages.progress_bar(int(epoch), epochs)
    if epoch is not None:
        return messages.epoch(epoch)
    return messages.step(state.step)


def line(store: EventStore, state: RunState, now: float) -> str:
    losses = loss_values(state)
    loss = f"{messages.number(losses[-1])} {messages.sparkline(losses)}" if losses else "n/a"
    gpu = last_gpu_util(store, state.run)
    return replies.status_line(
        run=state.run,
        host=state.host or "?",
        status=state.status,
        progress=progress(state),
        loss=loss,
        gpu=f"{gpu:.0f}%" if gpu is not None else "n/a",
        source=state.source or "n/a",
        anomalies=", ".join(state.open_anomalies) or "none",
        age=fmt_duration(now - state.last_ts) if state.last_ts else "?",
    )


def plan_line(store: EventStore, stream: str) -> str | None:
    """A plan that is under way, one line: each experiment's state (folded from the plan's stream)."""
    events = [e for _, e in store.iter_run(stream) if not isinstance(e, Malformed)]
    started = next((e for e in events if e.type == t.PLAN_STARTED), None)
    state = fold_plan(events)
    if started is None or state.finished:
        return None
    data = cast(PlanStartedData, started.data)
    names = data.get("experiments") or list(state.steps)
    return replies.plan_status_line(data.get("plan", stream), [(n, state.state_of(n)) for n in names])


def overview(store: EventStore, *, now: float | None = None) -> str:
    now = time.time() if now is None else now
    lines = []
    for run in known_runs(store):
        if run.startswith(PLAN_PREFIX):
            plan = plan_line(store, run)
            if plan is not None:
                lines.append(plan)
            continue
        state = run_state(store, run)
        if state.status in ACTIVE:
            lines.append(line(store, state, now))
    return "\n".join(lines) if lines else replies.no_active_runs()


def detail(store: EventStore, run: str, *, now: float | None = None) -> str:
    now = time.time() if now is None else now
    state = run_state(store, run)
    return "\n".join(
        [
            replies.status_detail_header(run, state.host or "?", state.status),
            line(store, state, now),
            replies.status_decisions(state.decisions[-5:]),
            replies.status_report(state.evidence[-1] if state.evidence else None),
        ]
    )

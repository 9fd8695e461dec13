"""The status operation (Slack's /status, the MCP server's `status`): each run's state read from the projections
(the run view of events/run_view.py, and a plan's fold), rendered one line per run (ops/status_messages.py).

Reads are batched, whatever the number of runs: every run's view comes from `run_states` (two pipelined round
trips, then the moved snapshots written back), and the shown lines' GPU samples from one more pipeline, so /status
at hundreds of runs costs a few round trips, not a few per run (bench/status.py).

The overview fits one screen however many runs the store holds: active runs only (finished ones with
`/status all`), the most urgent first (a stop under way, then the most open anomalies), at most
`SCREEN_LINES` lines and a last line saying how many were left out. Only the lines shown read the
run's recent events for a GPU sample.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import cast

from trainwarden.core.errors import TrainwardenError
from trainwarden.core.metrics import first_of
from trainwarden.events import types as t
from trainwarden.events.backend import EventLog, RecentLog
from trainwarden.events.codec import FIELD_BYTES
from trainwarden.events.payloads import PlanStartedData
from trainwarden.events.projection import RunState, is_finite_number
from trainwarden.events.run_view import Moved, read_states, run_state, save_views
from trainwarden.events.store import Malformed, decode_entries
from trainwarden.ops import status_messages
from trainwarden.policies.durations import fmt_duration
from trainwarden.remote.plan import PLAN_PREFIX, fold_plan

log = logging.getLogger(__name__)

ACTIVE = frozenset({"launched", "running", "stopping"})  # the rest: stopped, finished, failed (or unknown)
SCREEN_LINES = 15  # run and plan lines in one /status reply (about one phone screen)
GPU_SCAN = 500  # entries read back to find the last gpu sample
GPU_FIRST = 25  # of which read first, for all the shown runs at once
GPU_KEYS = ("util", "gpu_util", "utilization")
GPU_MARK = f'"{t.GPU}"'.encode()  # in every stored GPU sample's bytes: entries without it are not decoded
SPARK_POINTS = 12


def known_runs(store: EventLog) -> list[str]:
    return [run for run, _ in store.runs() if run != t.SYSTEM_RUN]


def gpu_utils(store: RecentLog, runs: Sequence[str]) -> dict[str, float | None]:
    """Each run's last GPU utilisation (None: no sample in its last GPU_SCAN entries). The runs' newest GPU_FIRST
    entries are read in one pipelined round trip (a sampled GPU is nearly always among them), the rest of the scan
    in one more for the runs whose sample was not; only entries that can be GPU samples are decoded."""
    found: dict[str, float | None] = {}
    todo: dict[str, str] = {run: "+" for run in runs}  # run -> the newest id still to read
    for count in (GPU_FIRST, GPU_SCAN - GPU_FIRST):
        if not todo:
            break
        pages = store.newest_pages(list(todo.items()), count=count, what="read the runs' recent events")
        left: dict[str, str] = {}
        for run, page in zip(todo, pages, strict=True):
            found[run] = _last_gpu(page, run)
            if found[run] is None and len(page) == count:
                left[run] = f"({page[-1][0].decode()}"
        todo = left
    return found


def _last_gpu(entries: list[tuple[bytes, dict[bytes, bytes]]], run: str) -> float | None:
    """Pure: the utilisation of the newest GPU sample among `entries` (newest first)."""
    maybe = [(sid, fields) for sid, fields in entries if GPU_MARK in fields.get(FIELD_BYTES, b"")]
    for _sid, item in decode_entries(maybe, run):
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
        return status_messages.progress_bar(state.step, total)
    epoch = state.last_metrics.get("epoch")
    if isinstance(epoch, int | float) and isinstance(epochs, int) and epochs > 0:
        return status_messages.progress_bar(int(epoch), epochs)
    if epoch is not None:
        return status_messages.epoch(epoch)
    return status_messages.step(state.step)


def line(state: RunState, now: float, gpu: float | None) -> str:
    losses = loss_values(state)
    loss = status_messages.value_trend(losses)
    return status_messages.status_line(
        run=state.run,
        host=state.host or "?",
        status=state.status,
        progress=progress(state),
        loss=loss,
        gpu=f"{gpu:.0f}%" if gpu is not None else "n/a",
        source=state.source or "n/a",
        anomalies=", ".join(state.open_anomalies) or "none",
        age=fmt_duration(now - state.last_activity_ts) if state.last_activity_ts else "?",
    )


def plan_line(store: EventLog, stream: str) -> str | None:
    """A plan that is under way, one line: each experiment's state (folded from the plan's stream)."""
    events = [e for _, e in store.iter_run(stream) if not isinstance(e, Malformed)]
    started = next((e for e in events if e.type == t.PLAN_STARTED), None)
    state = fold_plan(events)
    if started is None or state.finished:
        return None
    data = cast(PlanStartedData, started.data)
    names = data.get("experiments") or list(state.steps)
    return status_messages.plan_status_line(data.get("plan", stream), [(n, state.state_of(n)) for n in names])


def urgency(state: RunState) -> tuple[int, int, float, str]:
    """Sort key, most urgent first: active before ended, a stop under way, then the most open anomalies;
    ended runs most recent first."""
    if state.status not in ACTIVE:
        return (3, 0, -(state.last_activity_ts or 0.0), state.run)
    rank = 0 if state.status == "stopping" else 1 if state.open_anomalies else 2
    return (rank, -len(state.open_anomalies), 0.0, state.run)


def overview(store: RecentLog, *, everything: bool = False, now: float | None = None, limit: int = SCREEN_LINES,
             later: list[Callable[[], None]] | None = None) -> str:  # fmt: skip
    """Active runs (every run with `everything`) and plans under way, at most `limit` lines and a tail line.
    With `later`, the views that moved are saved by the callable added to it (run once the reply is out: the
    person waits for the list, not for the cache), else before returning."""
    now = time.time() if now is None else now
    states: list[RunState] = []
    plans: list[str] = []
    hidden = 0  # ended runs left out of an active-only overview
    names = known_runs(store)
    for stream in names:
        if stream.startswith(PLAN_PREFIX) and (plan := plan_line(store, stream)) is not None:
            plans.append(plan)
    read, moved = read_states(store, [run for run in names if not run.startswith(PLAN_PREFIX)])
    if later is None:
        save_views(store, moved)
    else:
        later.append(lambda: _save_quietly(store, moved))
    for state in read.values():
        if everything or state.status in ACTIVE:
            states.append(state)
        else:
            hidden += 1
    states.sort(key=urgency)
    shown = states[:limit]
    gpus = gpu_utils(store, [state.run for state in shown])
    lines = [line(state, now, gpus[state.run]) for state in shown] + plans[: max(0, limit - len(shown))]
    more = len(states) + len(plans) - len(lines)
    if not lines:
        lines.append(status_messages.no_active_runs())
    if more:
        lines.append(status_messages.status_more(more))
    if hidden:
        lines.append(status_messages.status_ended_hidden(hidden))
    return "\n".join(lines)


def _save_quietly(store: EventLog, moved: list[Moved]) -> None:
    """After the reply: a view not saved is only folded again by the next read."""
    try:
        save_views(store, moved)
    except TrainwardenError as exc:
        log.warning("could not save the runs' views after /status (%s); the next read folds them again", exc)


def detail(store: RecentLog, run: str, *, now: float | None = None) -> str:
    now = time.time() if now is None else now
    state = run_state(store, run)
    return "\n".join(
        [
            status_messages.status_detail_header(run, state.host or "?", state.status),
            line(state, now, gpu_utils(store, [run])[run]),
            status_messages.status_decisions(state.decisions[-5:]),
            status_messages.status_report(state.evidence[-1] if state.evidence else None),
        ]
    )

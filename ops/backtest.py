"""The backtest operation: when a policy would have fired on one recorded history (a run in the event log, a
training log file read as the agent reads it, or a W&B run directory), and how that is said. The CLI's
`policy backtest` prints it; the MCP server's `policy_backtest` returns it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from trainwarden.agent.errors import SourceUnavailable, WandbFileError, WandbUnavailable
from trainwarden.agent.logsource import RunLog
from trainwarden.agent.metric_files import LOG, kind_of, metric_file_events
from trainwarden.agent.tail import LogTail
from trainwarden.agent.wandb_source import history_events
from trainwarden.archive.history import load_history
from trainwarden.core.errors import UsageError
from trainwarden.core.metrics import at_step
from trainwarden.events.envelope import Event
from trainwarden.events.store import EventStore, Malformed
from trainwarden.policies.backtest import Backtest, Moment, backtest
from trainwarden.policies.default import default_policy
from trainwarden.policies.durations import fmt_duration
from trainwarden.policies.model import Policy
from trainwarden.workers.policy_source import read_policy_file

BACKTEST_RUN = "backtest"
# The W&B run-file reader plugs in here: a module with
# `history_events(run_dir: Path, *, run: str) -> Iterable[Event]`.


def named_policy(name: str) -> Policy:
    """'default' (the policy shipped with trainwarden), else a policy file's path."""
    return default_policy() if name == "default" else read_policy_file(Path(name))


def log_events(path: Path, *, interval: float) -> Iterator[Event]:
    """A training log turned into events offline, the way the agent reads it (formats, tracebacks);
    metric lines `interval` s apart. A structured metric file (CSV, trainer_state.json, TensorBoard) is
    read by its own reader, as the agent reads it (`agent.metric_files.kind_of`)."""
    if kind_of(path) != LOG and path.exists():
        yield from metric_file_events(path, run=BACKTEST_RUN, interval=interval)
        return
    if not path.is_file():
        raise SourceUnavailable(f"cannot read log file {path}: no such file")
    log = RunLog(run=BACKTEST_RUN, host=BACKTEST_RUN, tail=LogTail(path), block_idle_s=float("inf"))
    ts = 0.0
    while True:
        items = log.poll(ts)
        if not items and log.tail.read_to >= path.stat().st_size:
            items = log.finish(ts, final=True)  # the log is read to its end: a last line without newline too
            if not items:
                break
        for item in items:
            yield item.event if item.event.ts == ts else dataclasses.replace(item.event, ts=ts)
            if item.is_metric:
                ts += interval


def wandb_events(run_dir: Path) -> Iterator[Event]:
    try:
        yield from history_events(run_dir, run=BACKTEST_RUN)
    except (WandbFileError, WandbUnavailable) as exc:
        raise SourceUnavailable(f"--wandb-dir {run_dir}: {exc}") from exc


def backtest_one(policy: Policy, store: Callable[[], EventStore], *, run: str | None = None, log: Path | None = None,
                 wandb_dir: Path | None = None, interval: float = 10.0) -> tuple[Backtest, str]:  # fmt: skip
    """`policy` over one recorded history (a run in the event log, a log file, or a W&B run directory; the
    first given), and the words that name that source."""
    if run:
        entries = load_history(store(), run).entries  # archived files too
        events: Iterator[Event] = (e for _, e in entries if not isinstance(e, Malformed))
        source = f"run {run}"
    elif log:
        events, source = log_events(log, interval=interval), f"log {log} ({interval:g}s per line)"
    elif wandb_dir:
        events, source = wandb_events(wandb_dir), f"W&B run {wandb_dir}"
    else:
        raise UsageError("give the history to backtest: a run, a log file or a W&B run directory")
    return backtest(policy, events), source


def backtest_json(result: Backtest, *, source: str, gpus: float) -> dict[str, Any]:
    """One backtest as the `backtest` schema's single-run form."""
    saved = result.saved(gpus)
    return {
        "policy": {"name": result.policy.name, "hash": result.policy.hash},
        "source": source,
        "events": result.events,
        "metrics": result.metrics,
        "first_step": result.first_step,
        "last_step": result.last_step,
        "span_s": (result.last_ts or 0.0) - (result.first_ts or 0.0),
        "firings": [moment_json(m, first_ts=result.first_ts) for m in result.firings],
        "timeline": [moment_json(m, first_ts=result.first_ts) for m in result.timeline],
        "stop": None if result.stop is None else moment_json(result.stop, first_ts=result.first_ts),
        "saved": None
        if saved is None
        else {"steps": saved[0], "minutes": saved[1], "gpu_hours": saved[2], "gpus": gpus},
    }


def moment_json(m: Moment, *, first_ts: float | None, line: int | None = None) -> dict[str, Any]:
    after = max(0.0, m.ts - (first_ts if first_ts is not None else m.ts))
    out: dict[str, Any] = {"after_s": after, "step": m.step, "epoch": m.epoch, "rule": m.rule, "what": m.what,
                           "reason": m.reason}  # fmt: skip
    if line is not None:
        out["line"] = line
    if m.confirm_s:
        out["confirm_s"] = m.confirm_s
    return out


def _at(result: Backtest, ts: float, step: object) -> str:
    first = ts if result.first_ts is None else result.first_ts
    return f"{'+' + fmt_duration(max(0.0, ts - first)):>9}  step {step if step is not None else '-':<8}"


def backtest_lines(result: Backtest, *, source: str, gpus: float) -> list[str]:
    span = fmt_duration((result.last_ts or 0) - (result.first_ts or 0))
    steps = f"steps {result.first_step}..{result.last_step}, " if result.first_step is not None else ""
    lines = [f"Backtest of policy {result.policy.name!r} ({result.policy.hash}) over {source}: "
             f"{result.events} events, {steps}{span}", "", "Rules that would have fired:"]  # fmt: skip
    lines += [f"  {_at(result, m.ts, m.step)}  {m.rule} ({m.what}): {m.reason}" for m in result.firings] or ["  none"]
    lines += ["", "Decision timeline:"]
    lines += [f"  {_at(result, m.ts, m.step)}  {m.what:<8}  {m.rule or '-'}: {m.reason}" for m in result.timeline] or [
        "  no decision (no metric seen)"
    ]
    lines.append("")
    saved = result.saved(gpus)
    stop = result.stop
    if saved is None or stop is None:
        lines.append("No STOP: this policy would have let the run go to its end.")
    else:
        steps_saved, minutes, gpu_hours = saved
        before = f"{steps_saved} steps and " if steps_saved is not None else ""
        plural = "s" if gpus != 1 else ""
        early = fmt_duration(minutes * 60)
        asked = f" (a confirm-STOP: asked here, {fmt_duration(stop.confirm_s)} for a person to keep it)" if (
            stop.confirm_s) else ""  # fmt: skip
        lines.append(f"Would have stopped at {at_step(stop.step)} by {stop.rule}{asked}: {before}{early} before "
                     f"the run's end ({gpu_hours:.2f} GPU-hours saved at {gpus:g} GPU{plural}).")  # fmt: skip
    return lines

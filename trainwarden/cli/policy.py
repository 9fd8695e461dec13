"""`trainwarden policy check | show | backtest`: validate, print, and try a policy on recorded runs
(`policy report`: trainwarden/cli/policy_report.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainwarden import wiring
from trainwarden.agent.errors import SourceUnavailable, WandbFileError, WandbUnavailable
from trainwarden.agent.logsource import RunLog
from trainwarden.agent.metric_files import LOG, kind_of, metric_file_events
from trainwarden.agent.tail import LogTail
from trainwarden.agent.wandb_source import history_events
from trainwarden.archive.history import load_history
from trainwarden.cli import policy_report
from trainwarden.core.errors import UsageError
from trainwarden.core.metrics import at_step
from trainwarden.events.envelope import Event
from trainwarden.events.store import Malformed
from trainwarden.policies.backtest import Backtest, backtest
from trainwarden.policies.default import default_policy
from trainwarden.policies.durations import fmt_duration
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.lint import warnings
from trainwarden.policies.model import Policy
from trainwarden.settings import Settings
from trainwarden.tools.corpus import read_manifest
from trainwarden.tools.scorecard import Lines, moment_json, parts, run_json, score_run, table, totals, totals_json
from trainwarden.workers.policy_source import read_policy_file

BACKTEST_RUN = "backtest"
MANIFEST = "MANIFEST.yaml"
# The W&B run-file reader plugs in here: a module with
# `history_events(run_dir: Path, *, run: str) -> Iterable[Event]`.


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("policy", help="check, show or backtest a policy file")
    psub = s.add_subparsers(dest="policy_command", required=True, metavar="ACTION")

    c = psub.add_parser("check", help="validate policy files; exit 1 if any has a problem (for CI)")
    c.add_argument("files", nargs="+", type=Path, metavar="FILE")
    c.set_defaults(func=cmd_check)

    c = psub.add_parser("show", help="print a policy file (default: the configured one, else the default policy)")
    c.add_argument("file", nargs="?", type=Path, metavar="FILE")
    c.set_defaults(func=cmd_show)

    c = psub.add_parser("backtest", help="run a policy over a recorded history: when would it have fired?")
    c.add_argument("policy", metavar="POLICY", help="a policy file, or 'default'")
    source = c.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="a run in the event log")
    source.add_argument("--log", type=Path, metavar="FILE", help="a training log file (read offline)")
    source.add_argument("--wandb-dir", type=Path, metavar="DIR", help="a local W&B run directory")
    source.add_argument(
        "--corpus", type=Path, metavar="DIR", help="score the policy on labelled past runs listed in DIR/MANIFEST.yaml"
    )
    c.add_argument(
        "--interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="with --log or --corpus: seconds between two metric lines (a log has no clock; default 10)",
    )
    c.add_argument(
        "--gpus",
        type=float,
        default=1.0,
        help="GPUs the run used, for GPU-hours saved (default 1; a corpus run may say its own)",
    )
    c.add_argument("--json", action="store_true", help="print JSON (`trainwarden schema backtest` describes it)")
    c.add_argument(
        "--report-only", action="store_true", help="with --corpus: exit 0 even when the policy does not meet the bar"
    )
    c.set_defaults(func=cmd_backtest)  # fmt: skip

    policy_report.register(psub)


def cmd_check(args: argparse.Namespace, settings: Settings) -> int:
    failed = 0
    for path in args.files:
        try:
            policy = read_policy_file(path)
        except PolicyError as exc:
            failed += 1
            print(f"{path}: {len(exc.problems)} problem(s)", file=sys.stderr)
            for problem in exc.problems:
                print(f"  {problem}", file=sys.stderr)
            continue
        print(f"{path}: ok: policy {policy.name!r}, {len(policy.rules)} rules, hash {policy.hash}")
        for warning in warnings(policy):
            print(f"{path}: {warning}")
    return 1 if failed else 0


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    path = args.file or settings.policy_path
    policy = read_policy_file(path) if path else default_policy()
    print(policy.text, end="")
    return 0


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


def cmd_backtest(args: argparse.Namespace, settings: Settings) -> int:
    policy = named_policy(args.policy)
    if args.corpus:
        return corpus_scorecard(policy, args.corpus, interval=args.interval, gpus=args.gpus, as_json=args.json,
                                report_only=args.report_only)  # fmt: skip
    result, source = backtest_one(policy, settings, run=args.run, log=args.log, wandb_dir=args.wandb_dir,
                                  interval=args.interval)  # fmt: skip
    if args.json:
        print(json.dumps(backtest_json(result, source=source, gpus=args.gpus), indent=2))
        return 0
    for line in backtest_lines(result, source=source, gpus=args.gpus):
        print(line)
    return 0


def backtest_one(policy: Policy, settings: Settings, *, run: str | None = None, log: Path | None = None,
                 wandb_dir: Path | None = None, interval: float = 10.0) -> tuple[Backtest, str]:  # fmt: skip
    """`policy` over one recorded history (a run in the event log, a log file, or a W&B run directory; the
    first given), and the words that name that source."""
    if run:
        entries = load_history(wiring.store(settings), run).entries  # archived files too
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


def run_events(path: Path, *, interval: float) -> Iterator[Event]:
    """A corpus run's events: a W&B run directory, or a log or metric file (a TensorBoard directory too)."""
    tensorboard = path.is_dir() and next(path.rglob("*tfevents*"), None) is not None
    return wandb_events(path) if path.is_dir() and not tensorboard else log_events(path, interval=interval)


def corpus_scorecard(policy: Policy, corpus: Path, *, interval: float, gpus: float, as_json: bool,
                     report_only: bool) -> int:  # fmt: skip
    """Score `policy` on the runs DIR/MANIFEST.yaml lists; 0 when it meets the bar (or `report_only`)."""
    runs = read_manifest(corpus / MANIFEST)
    scores, results = [], []
    for i, run in enumerate(runs, 1):
        print(f"[{i}/{len(runs)}] {run.file}", file=sys.stderr, flush=True)
        result = backtest(policy, run_events(run.path, interval=run.interval or interval))
        lines = None if run.path.is_dir() else Lines(run.path.read_bytes())
        scores.append(score_run(run, result, lines=lines, gpus=gpus, interval=interval))
        results.append(result)
    tot = totals(scores)
    if as_json:
        document = {
            "policy": {"name": policy.name, "hash": policy.hash},
            "corpus": str(corpus),
            "runs": [run_json(s, r) for s, r in zip(scores, results, strict=True)],
            "totals": totals_json(tot),
            "parts": {part: totals_json(part_tot) for part, part_tot in parts(scores).items()},
        }
        print(json.dumps(document, indent=2))
    else:
        print(f"Scorecard of policy {policy.name!r} ({policy.hash}) on {corpus} ({len(runs)} runs)\n")
        for line in table(scores, tot):
            print(line)
    return 0 if tot.meets_bar or report_only else 1


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
        lines.append(f"Would have stopped at {at_step(stop.step)} by {stop.rule}: {before}{early} before "
                     f"the run's end ({gpu_hours:.2f} GPU-hours saved at {gpus:g} GPU{plural}).")  # fmt: skip
    return lines

"""CLI for remote runs: config check, preflight, launch EXP, plans, checkpoint retention, collect."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from trainwarden import wiring, writable
from trainwarden.core.errors import ConfigError
from trainwarden.core.signals import stop_on_signals
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event, time_seq
from trainwarden.events.payloads import CheckpointDeletedData, CheckpointSavedData
from trainwarden.events.projection import fold
from trainwarden.events.store import Malformed
from trainwarden.extras import require
from trainwarden.settings import Settings, project_dir

if TYPE_CHECKING:  # remote/ needs asyncssh (the `server` extra): imported by the commands that use it
    from trainwarden.remote.fleet import Fleet
    from trainwarden.remote.launch import RemoteLauncher


def gpus_arg(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(g) for g in text.split(",") if g.strip())
    except ValueError:
        raise ConfigError(f"--gpus expects comma-separated GPU indices like 0,1; got {text!r}") from None


def cmd_config_check(args: argparse.Namespace, settings: Settings) -> int:
    fleet = wiring.fleet(settings)
    print(f"settings: {settings.source}: ok")
    print(f"data directory: {settings.data_dir} (the default home of the paths below)")
    unwritable = 0
    for path in writable.paths_written(settings):
        problem = writable.write_problem(path.path, directory=path.directory)
        unwritable += problem is not None
        print(f"{path.setting} ({path.role}): {path.path}: {'FAIL ' + problem if problem else 'writable'}")
    if fleet is None:
        print("servers: none configured (servers_file not set)")
    else:
        print(f"servers: {settings.servers_file}: {len(fleet.servers)} ok ({', '.join(sorted(fleet.servers))})")
        print(f"experiments: {len(fleet.experiments)} ok ({', '.join(sorted(fleet.experiments))})")
    if unwritable:
        print(f"config check failed: {unwritable} path(s) cannot be written; set them to writable paths")
    return 1 if unwritable else 0


def cmd_preflight(args: argparse.Namespace, settings: Settings) -> int:
    require("preflight", "asyncssh")
    fleet = wiring.fleet(settings, required=True)
    assert fleet is not None
    launcher = wiring.remote_launcher(settings, fleet)
    experiment = launcher.experiment(args.experiment)
    gpus = launcher.gpu_ids(experiment, gpus_arg(args.gpus))
    results = launcher.preflight(experiment, gpus)
    for r in results:
        said = "ok  " if r.ok else "skip" if r.skipped else "FAIL"
        print(f"{said} {r.name:12} {r.detail}" + (f"\n     fix: {r.remedy}" if r.failed else ""))
    failed = [r for r in results if r.failed]
    print(
        f"preflight {'failed' if failed else 'passed'} for {experiment.name} on {experiment.server} GPUs {list(gpus)}"
    )
    return 1 if failed else 0


def experiment_launcher(settings: Settings) -> RemoteLauncher:
    fleet = wiring.fleet(settings, required=True)
    assert fleet is not None
    return wiring.remote_launcher(settings, fleet)


def _plan(args: argparse.Namespace, settings: Settings) -> tuple[Fleet, Any]:
    from trainwarden.remote.plan import parse_plan

    fleet = wiring.fleet(settings, required=True)
    assert fleet is not None
    return fleet, parse_plan(Path(args.plan), fleet)


def cmd_plan_run(args: argparse.Namespace, settings: Settings) -> int:
    require("plan", "asyncssh")
    fleet, plan = _plan(args, settings)
    runner = wiring.plan_runner(settings, fleet)
    runner.report = lambda text: print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)
    print(f"running plan {plan.name}: {', '.join(plan.experiments)} (Ctrl-C stops watching; runs keep going)")
    final = runner.run(plan, stop=stop_on_signals())
    return 0 if final.finished and all(final.state_of(n) == "finished" for n in plan.experiments) else 1


def cmd_plan_status(args: argparse.Namespace, settings: Settings) -> int:
    require("plan", "asyncssh")
    fleet, plan = _plan(args, settings)
    state = wiring.plan_runner(settings, fleet).state(plan)
    print(f"plan {plan.name}: {'finished' if state.finished else 'started' if state.started else 'not started'}")
    for name in plan.experiments:
        step = state.steps.get(name, {})
        deps = fleet.experiments[name].depends_on
        extra = f" GPUs {step['gpus']} on {step.get('server', '?')}" if step.get("gpus") else ""
        reason = f" - {step['reason']}" if step.get("reason") else ""
        after = f" (after {', '.join(deps)})" if deps else ""
        print(f"  {name:24} {state.state_of(name):10}{extra}{after}{reason}")
    return 0


def cmd_checkpoints(args: argparse.Namespace, settings: Settings) -> int:
    require("checkpoints", "asyncssh")
    from trainwarden.remote.retention import (
        delete_checkpoints,
        failed_reason,
        failed_run_line,
        list_checkpoints,
        plan_retention,
        read_record,
    )

    fleet = wiring.fleet(settings, required=True)
    assert fleet is not None
    experiment = wiring.remote_launcher(settings, fleet).experiment(args.experiment)
    if experiment.checkpoints is None:
        raise ConfigError(f"{experiment.name} has no checkpoints section in {experiment.source}")
    server = fleet.server_of(experiment)
    store = wiring.store(settings)
    events = [e for _, e in store.iter_run(experiment.name) if not isinstance(e, Malformed)]
    state = fold(events)
    saved: dict[str, float] = {}
    for data in (cast(CheckpointSavedData, e.data) for e in events if e.type == t.CHECKPOINT_SAVED):
        metric, path = data.get("metric"), data.get("path")
        if isinstance(metric, int | float) and path:
            saved[Path(path).name] = float(metric)
    files = list_checkpoints(wiring.ssh_pool(), server, experiment.checkpoints, saved)  # fmt: skip
    record = read_record(wiring.ssh_pool(), server, experiment.checkpoints, files)
    if record is not None and record.name:
        print(f"best per the run's record: {record.name} ({record.source})")
    reason = failed_reason(state.status, state.stops)
    if reason is not None:
        print(failed_run_line(reason, experiment.checkpoints))
    plan = plan_retention(files, experiment.checkpoints, failed=reason is not None, record=record)
    for name, reasons in plan.keep.items():
        print(f"keep    {name}  ({'; '.join(reasons)})")
    for name in plan.delete:
        print(f"delete  {name}")
    for note in plan.notes:
        print(f"note: {note}")
    if not args.apply:
        print(f"dry run: {len(plan.delete)} checkpoint(s), {plan.freed_bytes / 1e9:.2f} GB would be freed; "
              "add --apply to delete")  # fmt: skip
        return 0
    doomed_units = [f for f in files if f.name in plan.delete]
    gone = delete_checkpoints(wiring.ssh_pool(), server, experiment.checkpoints, doomed_units)
    directory = experiment.checkpoints.dir.rstrip("/")
    why = (f"retention: failed run ({reason}), checkpoints.failed_runs: no_weights"
           if reason is not None and experiment.checkpoints.failed_runs == "no_weights"
           else "retention: not the latest, the best or a milestone")  # fmt: skip
    producer = f"retention/{settings.host}"
    store.append([
        make_event(t.CHECKPOINT_DELETED, run=experiment.name, host=settings.host, producer=producer, seq=time_seq(),
                   data=CheckpointDeletedData(path=f"{directory}/{name}", server=server.name, reason=why))
        for name in gone
    ])  # fmt: skip
    print(f"deleted {len(gone)} checkpoint(s) on {server.name}")
    return 0


def cmd_collect(args: argparse.Namespace, settings: Settings) -> int:
    from trainwarden.remote.collect import collect
    from trainwarden.remote.collect_facts import BestBy
    from trainwarden.remote.final_metrics import FinalMetrics, WandbApi
    from trainwarden.wandb_files import WandbRunFiles

    fleet = wiring.fleet(settings) if settings.servers_file is not None else None
    best_by = {name: BestBy(e.checkpoints.best_metric, e.checkpoints.mode)
               for name, e in (fleet.experiments.items() if fleet else ())
               if e.checkpoints is not None and e.checkpoints.best_metric}  # fmt: skip
    metrics: FinalMetrics | None = None
    if args.wandb_dir:
        metrics = WandbRunFiles(Path(args.wandb_dir))
    elif not args.no_wandb:
        metrics = WandbApi(api_key=os.environ.get("WANDB_API_KEY"), base_url=os.environ.get("WANDB_BASE_URL"),
                           timeout_s=args.wandb_timeout)  # fmt: skip
    out = Path(args.out) if args.out else project_dir(settings.servers_file, settings.experiments_dir) or Path()
    written = collect(wiring.store(settings), out=out, runs=args.runs or None, best_by=best_by, metrics=metrics)
    for path in written:
        print(f"wrote {path}")
    return 0


def register(sub: Any) -> None:
    s = sub.add_parser("config", help="check the settings, servers and experiments files")
    s.add_argument("action", choices=["check"])
    s.set_defaults(func=cmd_config_check)

    s = sub.add_parser("preflight", help="run the pre-launch checks of an experiment on its server")
    s.add_argument("experiment")
    s.add_argument("--gpus", help="GPU indices to check, e.g. 0,1 (default: the experiment's)")
    s.set_defaults(func=cmd_preflight)

    s = sub.add_parser("plan", help="run or show a plan: a DAG of experiments on free GPUs")
    s.add_argument("action", choices=["run", "status"])
    s.add_argument("plan", help="plan YAML file")
    s.set_defaults(func=lambda a, st: cmd_plan_run(a, st) if a.action == "run" else cmd_plan_status(a, st))

    s = sub.add_parser("checkpoints", help="apply the checkpoint retention policy (dry run unless --apply)")
    s.add_argument("experiment")
    s.add_argument("--apply", action="store_true", help="really delete")
    s.set_defaults(func=cmd_checkpoints)

    s = sub.add_parser("collect", help="write runs.yaml, checkpoints.yaml, status.yaml, findings.md from the log")
    s.add_argument("runs", nargs="*", help="runs to include (default: all)")
    s.add_argument("--out", help="project directory (default: the one holding experiments/, else here)")
    s.add_argument("--no-wandb", action="store_true", help="final metrics from the log only (W&B not asked)")
    s.add_argument("--wandb-dir", help="read final metrics from this wandb/ directory's run files, not the W&B API")
    s.add_argument("--wandb-timeout", type=float, default=10.0, help="seconds per W&B API call (default 10)")
    s.set_defaults(func=cmd_collect)


def launch_args(s: argparse.ArgumentParser) -> None:
    s.add_argument("--gpus", help="remote: GPU indices, e.g. 0,1 (default: the experiment's or the first free)")
    s.add_argument("--resume", action="store_true", help="remote: use the experiment's resume_command")
    s.add_argument("--no-preflight", action="store_true", help="remote: skip the preflight checks")
    s.add_argument("--force", action="store_true", help="remote: launch although a plan holds the experiment back "
                   "(a parent has not finished); recorded in the launch with who and what it overrode")  # fmt: skip

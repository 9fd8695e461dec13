"""`trainwarden policy check | show | backtest`: validate, print, and try a policy on recorded runs
(`policy report`: trainwarden/cli/policy_report.py)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from trainwarden import wiring
from trainwarden.cli import policy_report
from trainwarden.events.envelope import Event
from trainwarden.ops.backtest import backtest_json, backtest_lines, backtest_one, log_events, named_policy, wandb_events
from trainwarden.policies.backtest import backtest
from trainwarden.policies.default import default_policy
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.lint import warnings
from trainwarden.policies.model import Policy
from trainwarden.settings import Settings
from trainwarden.tools.corpus import read_manifest
from trainwarden.tools.scorecard import Lines, parts, run_json, score_run, table, totals, totals_json
from trainwarden.workers.policy_source import read_policy_file

MANIFEST = "MANIFEST.yaml"


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


def cmd_backtest(args: argparse.Namespace, settings: Settings) -> int:
    policy = named_policy(args.policy)
    if args.corpus:
        return corpus_scorecard(policy, args.corpus, interval=args.interval, gpus=args.gpus, as_json=args.json,
                                report_only=args.report_only)  # fmt: skip
    result, source = backtest_one(policy, lambda: wiring.store(settings), run=args.run, log=args.log,
                                  wandb_dir=args.wandb_dir, interval=args.interval)  # fmt: skip
    if args.json:
        print(json.dumps(backtest_json(result, source=source, gpus=args.gpus), indent=2))
        return 0
    for line in backtest_lines(result, source=source, gpus=args.gpus):
        print(line)
    return 0


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

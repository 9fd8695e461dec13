"""`trainwarden policy report`: per rule, the STOP and WAIT decisions made, and those rules in shadow mode
would have made (`decision.shadow`), over a period of the event log: what turning a shadow rule on would do.

Reads each run's log in Redis from the period's first stream id on (ids are append times), so the cost
is the period's events, not the runs' whole histories. Policy names come from `policy.applied` (in the
runs) and `policy.loaded` (in the system run) events, and the built-in default policy.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import cast

from trainwarden import wiring
from trainwarden.events import types as t
from trainwarden.events.backend import EventLog
from trainwarden.events.envelope import Event
from trainwarden.events.payloads import DecisionData, PolicyAppliedData, PolicyLoadedData
from trainwarden.ops.times import parse_time
from trainwarden.policies.default import default_policy
from trainwarden.policies.durations import fmt_duration
from trainwarden.settings import Settings

DEFAULT_SINCE = "7d"
COUNTED = (t.STOP, t.WAIT)


@dataclass(slots=True)
class RuleCount:
    rule: str
    policy: str  # the policy's name ("?" when its hash is recorded nowhere)
    stop: int = 0
    wait: int = 0
    shadow_stop: int = 0  # would have stopped (shadow mode)
    shadow_wait: int = 0
    runs: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Report:
    since: float
    until: float
    runs_read: int
    rules: list[RuleCount]


def register(psub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = psub.add_parser("report", help="count STOP/WAIT decisions per rule, real and shadow-mode, over a period")
    since = f"from TIME (a duration ago like 7d, ISO time, unix seconds; default {DEFAULT_SINCE})"
    c.add_argument("--since", default=DEFAULT_SINCE, metavar="TIME", help=since)
    c.add_argument("--policy", metavar="NAME", help="only decisions made by the policy of this name")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    now = time.time()
    report = build_report(wiring.store(settings), since=parse_time(args.since, now=now, option="--since"), until=now,
                          policy=args.policy)  # fmt: skip
    if args.json:
        print(json.dumps(asdict(report), indent=2))
    else:
        for line in report_lines(report):
            print(line)
    return 0


def build_report(store: EventLog, *, since: float, until: float, policy: str | None = None) -> Report:
    names = {default_policy().hash: default_policy().name}
    names.update(_loaded(store))
    counts: dict[tuple[str, str], RuleCount] = {}
    runs = [run for run, last in store.runs() if last >= since and run != t.SYSTEM_RUN]
    for run in runs:
        for _, item in store.iter_run(run, start=f"{int(since * 1000)}-0"):
            if not isinstance(item, Event) or item.ts < since:
                continue
            if item.type == t.POLICY_APPLIED:
                applied = cast(PolicyAppliedData, item.data)
                names[str(applied.get("policy"))] = str(applied.get("name") or "?")
            elif item.type in (t.DECISION, t.DECISION_SHADOW):
                _count(counts, names, run, item, policy)
    for entry in counts.values():
        entry.runs.sort()
    rules = sorted(counts.values(), key=lambda c: (-(c.stop + c.shadow_stop), -(c.wait + c.shadow_wait), c.rule))
    return Report(since=since, until=until, runs_read=len(runs), rules=rules)


def _loaded(store: EventLog) -> Iterable[tuple[str, str]]:
    """Policy hash -> name, from the system run's `policy.loaded` events (a handful: one per policy edit)."""
    for _, item in store.iter_run(t.SYSTEM_RUN):
        if isinstance(item, Event) and item.type == t.POLICY_LOADED:
            loaded = cast(PolicyLoadedData, item.data)
            yield str(loaded.get("policy")), str(loaded.get("name") or "?")


def _count(counts: dict[tuple[str, str], RuleCount], names: dict[str, str], run: str, event: Event,
           only: str | None) -> None:  # fmt: skip
    decided = cast(DecisionData, event.data)  # decision.shadow has the same fields
    decision, rule = decided.get("decision"), decided.get("rule")
    if decision not in COUNTED or not rule:
        return
    name = names.get(str(decided.get("policy")), "?")
    if only is not None and name != only:
        return
    entry = counts.setdefault((name, rule), RuleCount(rule=rule, policy=name))
    shadow = event.type == t.DECISION_SHADOW
    field_name = ("shadow_" if shadow else "") + str(decision).lower()
    setattr(entry, field_name, getattr(entry, field_name) + 1)
    if run not in entry.runs:
        entry.runs.append(run)


def report_lines(report: Report) -> list[str]:
    span = fmt_duration(report.until - report.since)
    head = f"Decisions over the last {span} ({report.runs_read} run(s) with events in the period)"
    if not report.rules:
        return [head, "  no STOP or WAIT decided, and none would have been"]
    width = max(len("RULE"), *(len(r.rule) for r in report.rules))
    pwidth = max(len("POLICY"), *(len(r.policy) for r in report.rules))
    lines = [head, f"  {'RULE':<{width}}  {'POLICY':<{pwidth}}  STOP  WAIT  WOULD-STOP  WOULD-WAIT  RUNS"]
    for r in report.rules:
        lines.append(f"  {r.rule:<{width}}  {r.policy:<{pwidth}}  {r.stop:>4}  {r.wait:>4}  {r.shadow_stop:>10}  "
                     f"{r.shadow_wait:>10}  {len(r.runs):>4}")  # fmt: skip
    if any(r.shadow_stop or r.shadow_wait for r in report.rules):
        lines.append("  WOULD-*: rules in shadow mode; nothing was stopped. Turn one on with `shadow: false` "
                     "(or the policy's `mode: enforce`).")  # fmt: skip
    return lines

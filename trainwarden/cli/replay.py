"""`trainwarden replay` (timeline, filters, state as of a time, --verify) and `trainwarden check`.

Both read a run's whole history (trainwarden/history.py): archived files, then the log in Redis.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from trainwarden import render, wiring
from trainwarden.archive.history import Entry, History, load_history
from trainwarden.core.errors import PolicyNotRecorded, UnknownRun, UsageError
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.errors import StoreUnavailable
from trainwarden.events.payloads import PolicyLoadedData
from trainwarden.events.projection import fold
from trainwarden.events.store import EventStore, Malformed
from trainwarden.policies.default import default_policy
from trainwarden.policies.durations import duration_problem, parse_duration
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.loader import load_policy
from trainwarden.policies.model import Policy
from trainwarden.settings import Settings
from trainwarden.times import parse_time
from trainwarden.workers.evidence import final_summary, log_excerpt
from trainwarden.workers.policy_source import read_policy_file
from trainwarden.workers.report import check_facts, render_report
from trainwarden.workers.verify import verify_run

CHECK_TAIL_LINES = 10
TIME_OPTIONS = {"since": "--since", "until": "--until", "as_of": "--as-of"}  # how an error names each time


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("replay", help="print a run's timeline and its state folded from the log")
    s.add_argument("run", nargs="?", help="the run (default with --from: the run the archive files hold)")
    s.add_argument(
        "--from",
        dest="sources",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="read these archive files (or directories of them) first, then the log after them (repeatable)",
    )
    s.add_argument("--json", action="store_true", help="print the folded state as JSON")
    s.add_argument(
        "--type",
        action="append",
        metavar="TYPE",
        help="only events of this type (repeatable; 'anomaly' matches anomaly.opened and .resolved)",
    )
    s.add_argument("--since", metavar="TIME", help="only events at or after TIME: '30m ago' (or 30m), a clock time "
                   "like 09:51 (the latest), an ISO time like 2026-12-02T17:38, or unix seconds")  # fmt: skip
    s.add_argument("--until", metavar="TIME", help="only events at or before TIME (same forms)")
    s.add_argument("--as-of", metavar="TIME", help="the run's state at TIME, e.g. 09:51 (events after it are ignored)")
    s.add_argument(
        "--verify",
        action="store_true",
        help="re-evaluate the recorded events with the recorded policy; exit 1 if a decision differs",
    )
    s.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="with --verify: a policy file to use when the log does not hold the recorded one's text",
    )
    s.set_defaults(func=cmd_replay)  # fmt: skip

    s = sub.add_parser("check", help="print the training-check report for a run's current state")
    s.add_argument("run")
    s.add_argument(
        "--interval",
        metavar="DURATION",
        help="the report's Next check this long after now (default: workers.check_interval_s: 30m)",
    )
    s.set_defaults(func=cmd_check)


def _history(store: EventStore, run: str | None, sources: list[Path] | None = None) -> History:
    """The run's history; notes (archived entries missing here, Redis unreachable) go to stderr."""
    history = load_history(store, run, sources or [])
    for note in history.notes:
        print(f"note: {note}", file=sys.stderr)
    return history


def _selected(item: Event | Malformed, types: list[str] | None, since: float | None, until: float | None) -> bool:
    if isinstance(item, Malformed):
        return types is None and since is None and until is None
    if types is not None and not any(item.type == x or item.type.startswith(x + ".") for x in types):
        return False
    return (since is None or item.ts >= since) and (until is None or item.ts <= until)


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    store = wiring.store(settings)
    history = _history(store, args.run, args.sources)
    if args.verify:
        return _verify(store, history.run, history.entries, args.policy)
    for line in replay_lines(history, types=args.type, since=args.since, until=args.until, as_of=args.as_of,
                             as_json=args.json):  # fmt: skip
        print(line)
    return 0


def replay_lines(history: History, *, types: list[str] | None = None, since: str | None = None,
                 until: str | None = None, as_of: str | None = None, as_json: bool = False,
                 names: Mapping[str, str] = TIME_OPTIONS) -> list[str]:  # fmt: skip
    """The timeline (filtered) and the state folded from the log (as of a time); `as_json`: the state alone.
    Times in any form `parse_time` reads; `names` says each time's parameter in an error (the CLI's options)."""
    run, entries = history.run, history.entries
    now = time.time()
    since_ts = parse_time(since, now=now, option=names["since"]) if since else None
    until_ts = parse_time(until, now=now, option=names["until"]) if until else None
    as_of_ts = parse_time(as_of, now=now, option=names["as_of"]) if as_of else None
    if as_of_ts is not None:
        until_ts = as_of_ts if until_ts is None else min(until_ts, as_of_ts)
    state = fold(e for _, e in entries if isinstance(e, Event) and (as_of_ts is None or e.ts <= as_of_ts))
    if as_json:
        return [json.dumps(state.to_dict(), default=str, indent=2)]
    shown = [(sid, item) for sid, item in entries if _selected(item, types, since_ts, until_ts)]
    archived = f"; {history.archived} from {len(history.files)} archive file(s)" if history.files else ""
    lines = [f"Timeline of {run} ({len(shown)} of {len(entries)} entries{archived})"]
    lines += ["  " + render.timeline_line(sid, item) for sid, item in shown]
    lines.append(f"State as of {render.fmt_ts(as_of_ts)} (folded from the log alone)" if as_of_ts is not None
                 else "Final state (folded from the log alone)")  # fmt: skip
    lines += ["  " + line for line in render.state_lines(state)]
    return lines


class RecordedPolicies:
    """Policies by content hash, from the `trainwarden.system` run's `policy.loaded` events (their text), the
    default policy, and a file given on the command line."""

    def __init__(self, store: EventStore, *, extra: Path | None = None) -> None:
        self.texts: dict[str, tuple[str, str | None]] = {}  # hash -> its text, and its base's (`extends`)
        try:
            system = load_history(store, t.SYSTEM_RUN, required=False).entries  # archived too
        except StoreUnavailable:
            system = []  # replaying archive files offline: the default policy and --policy only
        for _, item in system:
            if not isinstance(item, Event) or item.type != t.POLICY_LOADED:
                continue
            loaded = cast(PolicyLoadedData, item.data)
            if text := loaded.get("text"):
                self.texts[loaded["policy"]] = text, loaded.get("base")
        self.known: dict[str, Policy] = {default_policy().hash: default_policy()}
        if extra is not None:
            policy = read_policy_file(extra)
            self.known[policy.hash] = policy

    def get(self, digest: str) -> Policy:
        if digest not in self.known:
            text, base = self.texts.get(digest, (None, None))
            if text is None:
                raise PolicyNotRecorded(
                    f"policy {digest} made decisions in this run but its text is not in the log (no policy.loaded "
                    f"for it in run '{t.SYSTEM_RUN}'); pass the policy file with --policy FILE"
                )
            try:
                self.known[digest] = load_policy(text, source=f"policy {digest} (recorded)", base_text=base)
            except PolicyError as exc:
                raise PolicyNotRecorded(
                    f"the recorded text of policy {digest} does not load (pass the policy file with --policy FILE): "
                    f"{exc}"
                ) from exc
        return self.known[digest]


def _verify(store: EventStore, run: str, entries: list[tuple[str, Event | Malformed]], extra: Path | None) -> int:
    result = verify_run(run, entries, RecordedPolicies(store, extra=extra).get)
    used = ", ".join(dict.fromkeys(result.policies)) or "none"
    print(f"Verify {run}: {result.outputs} recorded evaluator outputs ({result.decisions} decisions), "
          f"re-evaluated with policy {used}")  # fmt: skip
    if result.unevaluated:
        print(f"  {result.unevaluated} entries before the first policy.applied were folded, not re-evaluated")
    if result.ok:
        print("  OK: every decision and anomaly matches the log")
        return 0
    print(f"  {len(result.differences)} outputs differ:")
    for diff in result.differences[:50]:
        print("  " + diff.describe())
    return 1


def cmd_check(args: argparse.Namespace, settings: Settings) -> int:
    print(check_report(_history(wiring.store(settings), args.run), settings, interval=args.interval))
    return 0


def check_report(history: History, settings: Settings, *, interval: str | None = None,
                 option: str = "--interval") -> str:  # fmt: skip
    """The training-check report on the run's state now; a stopped run's ends with its FINAL_SUMMARY.
    `interval` (a duration, default workers.check_interval_s) sets Next check; `option` names it in an error."""
    run, entries = history.run, history.entries
    state = fold(e for _, e in entries if isinstance(e, Event))
    if state.event_count == 0:
        raise UnknownRun(run)
    every = settings.check_interval_s if interval is None else parse_duration(interval)
    if every is None or every <= 0:
        problem = duration_problem(interval) if interval is not None else None
        raise UsageError(f"{option}: {problem or repr(interval) + ' is not more than 0s'}")
    facts = check_facts(state, now=time.time(), interval_s=every, stale_s=settings.agent_wandb_stale_s,
                        files_inspected=[f"event log of {run} ({state.event_count} events)"])  # fmt: skip
    if read := log_excerpt(facts["log_path"], lines=CHECK_TAIL_LINES):
        facts["log_lines"] = read.span
        if not facts["log_tail"]:
            facts["log_tail"] = read.lines  # no notable line recorded: the log's own last lines
    if state.status == "stopped":
        facts["final_summary"] = recorded_summary(entries) or final_summary(facts, facts["evidence_pack"] or "none")
    return render_report(facts)


def recorded_summary(entries: list[Entry]) -> str | None:
    """The FINAL_SUMMARY the STOP's evidence pack holds (evidence.built carries it), so both say the same."""
    for _, e in reversed(entries):
        if isinstance(e, Event) and e.type in (t.EVIDENCE_BUILT, t.EVIDENCE_FAILED) and e.data.get("summary"):
            return str(e.data["summary"])
    return None

"""`trainwarden replay` (timeline, filters, state as of a time, --verify) and `trainwarden check`.

Both read a run's whole history (trainwarden/history.py): archived files, then the log in Redis.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainwarden import wiring
from trainwarden.archive.history import History, load_history
from trainwarden.events.store import EventStore
from trainwarden.ops.check import check_report
from trainwarden.ops.replay import RecordedPolicies, replay_lines
from trainwarden.settings import Settings
from trainwarden.workers.verify import verify_run


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


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    store = wiring.store(settings)
    history = _history(store, args.run, args.sources)
    if args.verify:
        return _verify(store, history, args.policy)
    for line in replay_lines(history, types=args.type, since=args.since, until=args.until, as_of=args.as_of,
                             as_json=args.json):  # fmt: skip
        print(line)
    return 0


def _verify(store: EventStore, history: History, extra: Path | None) -> int:
    run = history.run
    result = verify_run(run, history.entries, RecordedPolicies(store, extra=extra).get)
    used = ", ".join(dict.fromkeys(result.policies)) or "none"
    read = f"{len(history.entries)} entries ({history.archived} from {len(history.files)} archive file(s))"
    print(f"Verify {run}: {read}, {result.outputs} recorded evaluator outputs ({result.decisions} decisions), "
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

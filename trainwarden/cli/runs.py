"""`trainwarden runs`: the runs the event log knows, each with its status from the run view (the projection
/status reads, events/run_view.py), read for all runs in a few pipelined round trips.

trainwarden's own events live in a reserved pseudo-run (the dead-man's switch, policy loads, run-less
commands); it is no run of anyone's, so it is listed only with `--all`. A plan's log is named like a run;
it is listed as a plan, with how far the plan got.
"""

from __future__ import annotations

import argparse

from trainwarden import wiring
from trainwarden.events import types as t
from trainwarden.ops import render
from trainwarden.ops.runs import Row, rows
from trainwarden.settings import Settings

COLUMNS = ("RUN", "STATUS", "HOST", "LAST EVENT")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("runs", help="list known runs with their status (running, stopped, finished, failed, ...)")
    s.add_argument("--all", dest="everything", action="store_true",
                   help=f"also list trainwarden's own events (the system run, {t.SYSTEM_RUN})")  # fmt: skip
    s.set_defaults(func=cmd_runs)


def table(found: list[Row]) -> str:
    """Pure: the rows under their column names, aligned."""
    cells = [COLUMNS, *((r.run, r.status, r.host, render.fmt_ts(r.last_ts)) for r in found)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells)


def cmd_runs(args: argparse.Namespace, settings: Settings) -> int:
    found = rows(wiring.store(settings), everything=args.everything)
    print(table(found) if found else "no runs yet (`trainwarden launch` starts one, `trainwarden watch` adds one)")
    return 0

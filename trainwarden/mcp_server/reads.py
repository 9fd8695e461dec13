"""The MCP server's reads: `check`, `status`, `runs`, `replay`, `policy_backtest`, each the operation (ops/) that
the CLI (or /status) calls too, its text returned instead of printed. Nothing here writes an event: an agent that
checks a run every 30 minutes leaves the run's log as it found it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainwarden import wiring
from trainwarden.archive.history import load_history
from trainwarden.core.errors import UnknownRun
from trainwarden.events.store import EventStore
from trainwarden.mcp_server import messages
from trainwarden.ops import backtest as backtests
from trainwarden.ops import render, status
from trainwarden.ops import runs as runs_op
from trainwarden.ops.check import check_report
from trainwarden.ops.replay import replay_lines
from trainwarden.settings import Settings

TIME_PARAMETERS = {"since": "since", "until": "until", "as_of": "as_of"}  # errors name the tool's parameters


def check(store: EventStore, settings: Settings, run: str, *, interval: str | None = None) -> str:
    """The training-check report, as `trainwarden check RUN` prints it."""
    read = load_history(store, run)  # archived files too; UnknownRun if none
    return messages.with_notes(check_report(read, settings, interval=interval, option="interval"), read.notes)


def status_text(store: EventStore, *, run: str | None = None, everything: bool = False) -> str:
    """Slack's /status: one line per active run (every run with `everything`), or one run in detail."""
    if run is None:
        return status.overview(store, everything=everything)
    if run not in status.known_runs(store):
        raise UnknownRun(run)
    return status.detail(store, run)


def runs(store: EventStore) -> list[dict[str, Any]]:
    """Every run (not trainwarden's own system log), most recently active first, with what an agent
    picks one by: its status, host, step, open anomalies and last decision (`trainwarden runs`'s rows)."""
    out: list[dict[str, Any]] = []
    for row in runs_op.rows(store):
        state = row.state
        out.append({"run": row.run, "status": row.status, "host": state.host or None if state else None,
                    "step": state.step if state else None,
                    "open_anomalies": sorted(state.open_anomalies) if state else [],
                    "decision": state.decision if state else None,
                    "last_event": render.fmt_ts(row.last_ts)})  # fmt: skip
    return out


def replay(store: EventStore, run: str, *, as_of: str | None = None, since: str | None = None,
           until: str | None = None, types: list[str] | None = None, as_json: bool = False) -> str:  # fmt: skip
    """`trainwarden replay RUN`: the timeline and the state folded from the log alone (as of `as_of`)."""
    read = load_history(store, run)  # archived files too; UnknownRun if none
    lines = replay_lines(read, types=types, since=since, until=until, as_of=as_of, as_json=as_json,
                         names=TIME_PARAMETERS)  # fmt: skip
    return messages.with_notes("\n".join(lines), read.notes)


def policy_backtest(settings: Settings, *, policy: str = "default", run: str | None = None, log: str | None = None,
                    wandb_dir: str | None = None, interval_s: float = 10.0, gpus: float = 1.0,
                    as_json: bool = False) -> str:  # fmt: skip
    """`trainwarden policy backtest`: when `policy` would have fired on one recorded history."""
    chosen = backtests.named_policy(policy)
    result, source = backtests.backtest_one(
        chosen,
        lambda: wiring.store(settings),
        run=run,
        log=Path(log) if log else None,
        wandb_dir=Path(wandb_dir) if wandb_dir else None,
        interval=interval_s,
    )
    if as_json:
        return json.dumps(backtests.backtest_json(result, source=source, gpus=gpus), indent=2)
    return "\n".join(backtests.backtest_lines(result, source=source, gpus=gpus))

"""/status's words, the same in Slack and over MCP: one line per run, a plan's line, one run in detail, and the
lines that say what was left out. Nothing here touches I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainwarden.core.words import clock, number, sparkline

NAMESPACE = "tw"  # the one slash command the manifest ships: `/tw SUBCOMMAND` (bot/commands.py REGISTRY)
BAR_WIDTH = 10


def slash(command: str) -> str:
    """How a subcommand is typed: `/tw stop`."""
    return f"/{NAMESPACE} {command}"


def progress_bar(done: int, total: int) -> str:
    filled = max(0, min(BAR_WIDTH, round(BAR_WIDTH * done / total))) if total > 0 else 0
    return f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}"


def epoch(value: object) -> str:
    return f"epoch {number(value)}"


def step(value: int | None) -> str:
    return f"step {value if value is not None else '?'}"


def status_line(
    *, run: str, host: str, status: str, progress: str, loss: str, gpu: str, source: str, anomalies: str, age: str
) -> str:
    return f"{run}@{host} {status} {progress} loss {loss} gpu {gpu} src {source} anomalies {anomalies} last {age} ago"


def value_trend(values: Sequence[float]) -> str:
    """/status's `loss` column: the last value, then its recent trend when there is one (`1.95 ▇▅▃▁`, `nan`)."""
    return " ".join(x for x in (number(values[-1]), sparkline(values)) if x) if values else "n/a"


def plan_status_line(plan: str, experiments: list[tuple[str, str]]) -> str:
    """/status line of a plan under way: `plan sweep1: e1 finished · e2 running · e3 pending`."""
    return f"plan {plan}: " + " · ".join(f"{name} {state}" for name, state in experiments)


def status_detail_header(run: str, host: str, status: str) -> str:
    return f"*{run}@{host}* is {status}"


def status_decisions(decisions: Sequence[Mapping[str, Any]]) -> str:
    lines = [f"{d.get('decision')} at {clock(d.get('ts', 0))}: {d.get('reason')}" for d in decisions]
    return "Decisions: " + ("; ".join(lines) if lines else "none yet")


def status_report(path: str | None) -> str:
    return f"Last training-check report: `{path}/report.md`" if path else "No training-check report yet."


def no_active_runs() -> str:
    return "No active runs."


def status_more(count: int) -> str:
    return f"… and {count} more: {slash('status')} RUN for one run"


def status_ended_hidden(count: int) -> str:
    return f"{count} ended {'run' if count == 1 else 'runs'} not shown: {slash('status')} all"

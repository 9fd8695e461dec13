"""The check operation: the training-check report on a run's state now, from its whole history (archived
files, then the log). The CLI's `check` prints it; the MCP server's `check` returns it.
"""

from __future__ import annotations

import time

from trainwarden.archive.history import Entry, History
from trainwarden.core.errors import UnknownRun, UsageError
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.projection import fold
from trainwarden.ops.settings import OpsSettings
from trainwarden.policies.durations import duration_problem, parse_duration
from trainwarden.workers.evidence import final_summary, log_excerpt
from trainwarden.workers.report import check_facts, render_report

CHECK_TAIL_LINES = 10


def check_report(history: History, settings: OpsSettings, *, interval: str | None = None,
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

"""The runs operation: the runs the event log knows, each with its status from the run view (the projection
/status reads, events/run_view.py), read for all runs in a few pipelined round trips. The CLI's `runs` prints
them as a table; the MCP server's `runs` returns them as records.

trainwarden's own events live in a reserved pseudo-run; it is listed only with `everything`. A plan's log is
named like a run; it is listed as a plan, with how far the plan got.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.projection import RunState
from trainwarden.events.run_view import run_states
from trainwarden.events.store import EventStore
from trainwarden.remote.plan import PLAN_PREFIX, fold_plan

SYSTEM = "system"  # the status column of the reserved system run


@dataclass(frozen=True, slots=True)
class Row:
    run: str
    status: str
    host: str
    last_ts: float  # a run's last activity (events/types.py ACTIVITY_TYPES), else its log's last event
    state: RunState | None = None  # the run's view (none for the system run and plans)


def rows(store: EventStore, *, everything: bool = False) -> list[Row]:
    """Each known run, most recently active first, with its status. A run's time is its last activity, not its log's
    last append: the agent's heartbeats and the commands people send about it go on after it ended."""
    known = [(run, ts) for run, ts in store.runs() if everything or run != t.SYSTEM_RUN]
    plain = [run for run, _ in known if run != t.SYSTEM_RUN and not run.startswith(PLAN_PREFIX)]
    states = run_states(store, plain)
    out = []
    for run, ts in known:
        if run in states:
            state = states[run]
            out.append(Row(run, state.status, state.host or "-", state.last_activity_ts or ts, state))
        elif run == t.SYSTEM_RUN:
            out.append(Row(run, SYSTEM, "-", ts))
        else:
            out.append(Row(run, plan_status(store, run), "-", ts))
    return sorted(out, key=lambda row: row.last_ts, reverse=True)


def plan_status(store: EventStore, stream: str) -> str:
    plan = fold_plan(e for _, e in store.iter_run(stream) if isinstance(e, Event))
    return "plan finished" if plan.finished else "plan running" if plan.started else "plan"

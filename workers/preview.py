"""At a policy reload, how many running runs the new policy would stop right now: a backtest
(policies/backtest.py) of it over each run that is still running and was active within a day of the
newest event (event time, as everywhere: decision 0016). Said in the worker's SIGHUP line, so that a
wrong threshold shows as "would stop 50 of 50 running runs" before the stop breaker has to catch it."""

from __future__ import annotations

from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.projection import ENDED, RunState, apply
from trainwarden.events.store import EventStore
from trainwarden.policies.backtest import backtest
from trainwarden.policies.model import Policy

DAY_S = 86_400.0
SHOWN = 5  # runs named in the line; the rest are counted


def would_stop(store: EventStore, policy: Policy, *, since_s: float = DAY_S) -> tuple[list[str], int]:
    """(the running runs `policy` would stop now, how many runs are running)."""
    runs = [(run, ts) for run, ts in store.runs() if run != t.SYSTEM_RUN]
    newest = max((ts for _, ts in runs), default=0.0)
    stopped: list[str] = []
    running = 0
    for run, ts in runs:
        if newest - ts > since_s:
            continue
        events = [e for _, e in store.iter_run(run) if isinstance(e, Event)]
        state = RunState()
        for event in events:
            apply(state, event)
        if state.status in ENDED or state.status == "stopping":
            continue
        running += 1
        if backtest(policy, events).stop is not None:
            stopped.append(run)
    return sorted(stopped), running


def said(stopped: list[str], running: int) -> str:
    """The reload line's clause."""
    if not stopped:
        return f"a backtest over the {running} running run(s) stops none now"
    names = ", ".join(stopped[:SHOWN]) + (f" and {len(stopped) - SHOWN} more" if len(stopped) > SHOWN else "")
    return f"a backtest over the {running} running run(s) stops {len(stopped)} now ({names})"

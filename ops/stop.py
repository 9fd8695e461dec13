"""The stop operation: ask the workers to stop a run, refusing first what cannot be stopped, and read the
outcome. The CLI's `stop`, the MCP server's `stop` and a launch's first seconds (who asked a run to stop) call it.
"""

from __future__ import annotations

import time
from typing import cast

from trainwarden.core.errors import NotStoppable, UnknownRun
from trainwarden.core.words import closest, said
from trainwarden.events import types as t
from trainwarden.events.backend import EventLog
from trainwarden.events.envelope import Event, make_event, time_seq
from trainwarden.events.payloads import StopRequestedData
from trainwarden.events.projection import ENDED
from trainwarden.events.run_view import run_state
from trainwarden.events.store import EventStore
from trainwarden.ops.settings import OpsSettings
from trainwarden.remote.agent_stop import AGENT, agent_absent, stop_means

POLL_S = 0.1


def request_stop(
    store: EventStore, settings: OpsSettings, run: str, asked: StopRequestedData
) -> tuple[Event, str | None]:
    """Append `stop.requested` for `run` (the event and its stream id); the workers carry it out. Refused first,
    with nothing appended, what cannot be stopped: an unknown run, one that ended, one that nothing recorded
    says how to stop, one only its host's agent can stop while that agent is absent. The CLI's `stop` and the
    MCP server's share it, so both refuse alike."""
    if store.length(run) == 0:
        raise UnknownRun(run, meant=closest(run, (name for name, _ in store.runs())))
    state = run_state(store, run)  # the read model: archived runs too, and no fold of a long log
    if state.status in ENDED:
        raise NotStoppable(f"{run} has ended already ({state.status}): there is nothing to stop")
    means = stop_means(state.launch, state.watched)
    if means is None:
        raise NotStoppable(
            f"trainwarden has no way to stop {run}: it was not launched by trainwarden and its watch names no "
            f"pid, match, tmux session or stop command; add one with `trainwarden watch {run} --log FILE "
            "--pid PID` (the agent keeps watching it)"
        )
    if means == AGENT:
        host = (state.watched.get("host") if state.watched else None) or state.host
        absent = agent_absent(store, host, now=time.time())
        if absent is not None:
            raise NotStoppable(f"{run} can only be stopped by the agent on its host, but {absent}")
    producer = f"{asked.get('by') or 'cli'}/{settings.host}"
    event = make_event(t.STOP_REQUESTED, run=run, host=settings.host, producer=producer, seq=time_seq(), data=asked)
    return event, store.append_one(event)


def wait_outcome(store: EventStore, run: str, request: str, after: str | None, timeout: float) -> Event | None:
    deadline = time.monotonic() + timeout
    while True:
        for _sid, event in store.iter_run(run, after=after):
            if (isinstance(event, Event) and event.type in (t.STOP_DONE, t.STOP_FAILED)
                    and event.data.get("request") == request):  # fmt: skip
                return event
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_S)


def stop_asked(store: EventLog, run: str, *, after: float) -> str | None:
    """Who asked the run to stop since its launch, and why; None if nobody did."""
    asked = [e for _, e in store.iter_run(run) if isinstance(e, Event) and e.type == t.STOP_REQUESTED and e.ts >= after]
    if not asked:
        return None
    d = cast(StopRequestedData, asked[-1].data)
    by = f"rule {d['rule']}" if d.get("rule") else said(d.get("user") or d.get("by"), "someone")
    return f"{by} asked for it ({said(d.get('reason'), 'no reason given')})"

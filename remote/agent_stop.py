"""Stopping a run trainwarden did not launch: through the agent that watches it on its host.

Only that agent can reach the run's processes (a pid, processes matched by command line, a tmux
session there). The worker sends a `stop` message on the host's control stream (agent/watch.py)
and looks for the outcome the agent records (agent/stopper.py) under the id the message names when
the run's log brings it back (it does not wait: workers/actions.py); `trainwarden stop --wait`
polls for it. The caller's own `stop.failed` uses that same id when the agent is not running or
does not answer in time, so whichever is appended first is the one outcome kept.
"""

from __future__ import annotations

from trainwarden.events.control import send_control
from trainwarden.events.envelope import Event
from trainwarden.events.heartbeat import component_name, read_beat
from trainwarden.events.history import has_written
from trainwarden.events.payloads import RunLaunchedData, RunWatchedData
from trainwarden.events.store import EventStore, Malformed

LAUNCH = "launch"  # stopped by the workers from run.launched (remote/stop.py)
AGENT = "agent"  # stopped by the agent on the run's host
ANSWER_SLACK_S = 30.0  # beyond the two grace periods: the control read, SIGKILL, the round trips


def stop_means(launch: RunLaunchedData, watched: RunWatchedData | None) -> str | None:
    """Who can stop the run: LAUNCH, AGENT, or None when nothing recorded says how."""
    if launch.get("session") or launch.get("stop_command") or launch.get("server"):
        return LAUNCH
    if watched and any(watched.get(key) for key in ("pid", "match", "session", "stop_command")):
        return AGENT
    return None


def agent_absent(store: EventStore, host: str, *, now: float) -> str | None:
    """Why the agent on `host` cannot take a stop now; None when its heartbeat is current."""
    beat = read_beat(store.redis, store.keys, component_name("agent", host))
    if beat is None:
        return f"no trainwarden agent runs on {host} (none has sent a heartbeat): start `trainwarden agent` there"
    if beat.silent(now):
        return (
            f"the trainwarden agent on {host} is not running (its last heartbeat is {beat.age(now):.0f}s old): "
            "start `trainwarden agent` there again"
        )
    return None


def send_stop(store: EventStore, *, host: str, request: Event, reply_as: str) -> None:
    data = request.data
    message = {"op": "stop", "run": request.run, "request": request.id, "reply_as": reply_as,
               "reason": str(data.get("reason") or ""), "by": str(data.get("by") or "")}  # fmt: skip
    send_control(store.redis, store.keys, host, message, what="send the stop to the run's agent", run=request.run)


def answer(store: EventStore, *, run: str, after: str, reply_as: str) -> Event | None:
    """The event `reply_as` recorded in the run's log after stream id `after`; None while there is none."""
    if not has_written(store.redis, store.keys, run, reply_as):
        return None
    for _sid, event in store.iter_run(run, after=after):
        if not isinstance(event, Malformed) and event.producer == reply_as:
            return event
    return None


def answer_timeout(grace_s: float) -> float:
    return 2 * grace_s + ANSWER_SLACK_S

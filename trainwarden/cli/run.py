"""`trainwarden watch` (add a run to the running agent of its host) and `trainwarden stop`.

`watch` writes to the host's control stream, as `launch` does, and never starts an agent: a second
agent would adopt every run of the host again. `stop` refuses what cannot be stopped (an unknown
run, one that ended, one that nothing recorded says how to stop) before it asks for anything.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

from trainwarden import wiring
from trainwarden.agent.errors import ControlMessageError
from trainwarden.agent.watch import DEFAULT_STOP_GRACE_S, RunWatch
from trainwarden.core.errors import NotStoppable, UnknownRun, UsageError
from trainwarden.core.redact import redact_text
from trainwarden.core.tmux import tmux_argv
from trainwarden.core.words import closest
from trainwarden.events import types as t
from trainwarden.events.control import send_control
from trainwarden.events.envelope import Event, make_event, time_seq
from trainwarden.events.payloads import RunWatchedData, StopRequestedData, StopResultData
from trainwarden.events.projection import ENDED
from trainwarden.events.run_view import run_state
from trainwarden.events.store import EventStore
from trainwarden.remote.agent_stop import AGENT, agent_absent, stop_means
from trainwarden.settings import Settings

POLL_S = 0.1


def cmd_watch(args: argparse.Namespace, settings: Settings) -> int:
    host = args.host or settings.host
    if args.pid is not None and args.pid >= 2 and host == settings.host:
        _check_signallable(args.pid, host)
    if args.tmux_session and not args.tmux_socket and host == settings.host:
        args.tmux_socket = _tmux_server(args.tmux_session)
    log = str(Path(args.log).expanduser().resolve())
    fields: dict[str, Any] = {
        "run": args.run, "log": log, "pid": args.pid, "match": args.match, "session": args.tmux_session,
        "tmux_socket": args.tmux_socket, "stop_grace_s": args.grace,
        "stop_command": shlex.split(args.stop_command) if args.stop_command else None,
        "allow_offline_wandb": True if args.allow_offline_wandb else None,
    }  # fmt: skip
    try:
        watch = RunWatch.from_dict({k: v for k, v in fields.items() if v is not None})
    except ControlMessageError as exc:
        raise UsageError(str(exc)) from None
    store = wiring.store(settings)
    message = {k: json.dumps(v) if k == "stop_command" else str(v) for k, v in watch.to_dict().items()}
    sid = send_control(store.redis, store.keys, host, {"op": "watch", **message},
                       what="register the run with the agent", run=args.run, host=host)  # fmt: skip
    absent = agent_absent(store, host, now=time.time())
    if absent is not None:
        print(f"registered {args.run} with the agent of {host}, but {absent}; it picks the run up when it starts",
              file=sys.stderr)  # fmt: skip
        return 0
    watched = _wait_watched(store, args.run, sid, args.timeout)
    if watched is None:
        print(f"trainwarden: error: the agent on {host} did not take up {args.run} within {args.timeout:g}s "
              "(see its log)", file=sys.stderr)  # fmt: skip
        return 1
    print(f"watching {args.run} on {host}: log {watch.log}; a STOP {_how(watched)}")
    return 0


def _check_signallable(pid: int, host: str) -> None:
    """A STOP signals the process: it must exist and be one the caller may signal (not root's, not another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise UsageError(f"--pid {pid}: no such process on this host ({host})") from None
    except PermissionError:
        raise UsageError(f"--pid {pid}: the process is not yours to signal (a STOP could not stop it)") from None


def _tmux_server(session: str) -> str:
    """The socket path of the tmux server that holds `session` as the caller's own tmux sees it (inside tmux:
    the server the caller is in), so that the agent asks that server, whatever tmux it runs in."""
    path = ""
    try:  # list-panes fails on a session the server does not have (display-message would answer all the same)
        argv = tmux_argv(None, "list-panes", "-t", f"={session}:", "-F", "#{socket_path}")
        found = subprocess.run(argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL, check=False)
        path = found.stdout.partition("\n")[0].strip() if found.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        pass
    if not path.startswith("/"):
        raise UsageError(f"--tmux-session {session}: your tmux server has no such session (inside tmux, the one you "
                         "are in); start it first, or name its server with --tmux-socket")  # fmt: skip
    return path


def _wait_watched(store: EventStore, run: str, control: str, timeout: float) -> RunWatchedData | None:
    """The agent's run.watched for control entry `control` (stream ids of one Redis share its clock)."""
    start = f"{control.partition('-')[0]}-0"
    deadline = time.monotonic() + timeout
    while True:
        for _sid, event in store.iter_run(run, start=start):
            if isinstance(event, Event) and event.type == t.RUN_WATCHED and event.data.get("control") == control:
                return cast(RunWatchedData, event.data)
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_S)


def _how(w: RunWatchedData) -> str:
    grace = f"{w.get('stop_grace_s', DEFAULT_STOP_GRACE_S):g}s"
    if w.get("stop_command"):
        return f"runs {shlex.join(w.get('stop_command') or [])}"
    if w.get("session"):
        return f"sends Ctrl-C to tmux session {w.get('session')}, then kills it after {grace}"
    if w.get("pid") or w.get("match"):
        which = f"pid {w.get('pid')}" if w.get("pid") else f"the processes matching {w.get('match')!r}"
        return f"sends SIGINT to {which}, SIGTERM after {grace}, SIGKILL after {grace} more"
    return "cannot stop it: give --pid, --match, --tmux-session or --stop-command"


def cmd_stop(args: argparse.Namespace, settings: Settings) -> int:
    store = wiring.store(settings)
    asked: StopRequestedData = {"by": "cli", "user": getpass.getuser(), "reason": redact_text(args.reason)}
    event, sid = request_stop(store, settings, args.run, asked)
    if not args.wait:
        print(f"stop requested for {args.run}; the workers will carry it out (see `trainwarden replay {args.run}`)")
        return 0
    print(f"stop requested for {args.run}; waiting up to {args.timeout:g}s for the outcome", flush=True)
    outcome = wait_outcome(store, args.run, event.id, sid, args.timeout)
    if outcome is None:
        print(f"trainwarden: error: no outcome within {args.timeout:g}s: are `trainwarden dispatcher` and "
              "`trainwarden worker` running?", file=sys.stderr)  # fmt: skip
        return 1
    d = cast(StopResultData, outcome.data)
    if outcome.type == t.STOP_DONE:
        print(f"stopped {args.run}: {d.get('detail')}")
        return 0
    by_hand = f"; stop it by hand: {d['hint']}" if d.get("hint") else ""
    print(f"trainwarden: error: stop failed for {args.run}: {d.get('error')}{by_hand}", file=sys.stderr)
    return 1


def request_stop(store: EventStore, settings: Settings, run: str, asked: StopRequestedData) -> tuple[Event, str | None]:
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


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected seconds above 0, got {text!r}")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("watch", help="add a run you started yourself to the running agent of its host "
                       "(no restart; never starts an agent)")  # fmt: skip
    s.add_argument("run")
    s.add_argument("--log", required=True, help="its training log (or metric file) on the run's host")
    how = s.add_mutually_exclusive_group()
    how.add_argument("--pid", type=int, help="its training process: a STOP sends it SIGINT, SIGTERM, then SIGKILL")
    how.add_argument("--match", metavar="PATTERN", help="a regular expression over command lines that finds its "
                     "processes (like pgrep -f), signalled as with --pid")  # fmt: skip
    s.add_argument("--tmux-session", metavar="S", help="its tmux session: a STOP sends Ctrl-C, then kills it")
    s.add_argument("--tmux-socket", metavar="NAME", help="the tmux socket of --tmux-session (a name: tmux -L; a "
                   "path: tmux -S; default: the server your tmux finds it on)")  # fmt: skip
    s.add_argument("--stop-command", metavar="CMD", help="a command that stops it cleanly, run by the agent "
                   "(split like a shell would, never run by one)")  # fmt: skip
    s.add_argument("--grace", type=_positive, default=DEFAULT_STOP_GRACE_S, metavar="S",
                   help=f"seconds for SIGINT / Ctrl-C, then SIGTERM (default {DEFAULT_STOP_GRACE_S:g})")  # fmt: skip
    s.add_argument("--allow-offline-wandb", action="store_true", help="the run is offline on purpose: W&B "
                   "offline is no finding, and the default policy does not stop it for that")  # fmt: skip
    s.add_argument("--host", help="the run's host, whose agent watches it (default: this host)")
    s.add_argument("--timeout", type=_positive, default=10.0, metavar="S",
                   help="how long to wait for the agent to take it up (default 10)")  # fmt: skip
    s.set_defaults(func=cmd_watch)

    s = sub.add_parser("stop", help="ask the workers to stop a run; exits 1 when it cannot be stopped")
    s.add_argument("run")
    s.add_argument("--reason", default="stopped from the command line", help="said in the STOPPED message")
    s.add_argument("--wait", action="store_true", help="wait for the outcome and print it (exit 1 if it failed)")
    s.add_argument("--timeout", type=_positive, default=60.0, metavar="S",
                   help="with --wait: how long to wait (default 60)")  # fmt: skip
    s.set_defaults(func=cmd_stop)

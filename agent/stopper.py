"""Stopping a watched run on this host: only this host's agent can reach its processes.

A worker carrying out the STOP of a run trainwarden did not launch sends a `stop` control message
(agent/watch.py); the agent carries it out here, in a thread of its own so that the other runs are
watched on meanwhile, and records the outcome as `stop.done` / `stop.failed` with the id the
request names (`<reply_as>:1`): the store keeps one event per id, so a repeated request records
one outcome, and a request already under way or done is not carried out twice.

The procedure, by what the watch names (first that applies):
- `stop_command`: run it (an argv, no shell); exit code 0 is success;
- `session`: Ctrl-C to its tmux pane, wait up to the grace period, then kill the session, on the
  run's own tmux server (trainwarden.core.tmux); done once the process the agent followed in it is gone.
  A session the server does not have is "already ended" only when that process is gone: while it
  lives, or when the agent never saw it, the stop failed (the session is on another server);
- `pid` / `match`: SIGINT to its top processes and every process below them (as Ctrl-C in a
  terminal), wait up to the grace period, then SIGTERM, wait again, then SIGKILL.
A run whose processes are already gone is a no-op success.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from trainwarden.agent import procfs
from trainwarden.agent.health import ProcessHealth
from trainwarden.agent.watch import RunWatch, StopOrder
from trainwarden.core.tmux import server_words, tmux_argv, tmux_env
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.payloads import StopResultData

log = logging.getLogger(__name__)

STOP_COMMAND_TIMEOUT_S = 60.0
TMUX_TIMEOUT_S = 10.0
KILL_WAIT_S = 5.0  # after SIGKILL: the kernel ends the process at once, unless it is stuck in the kernel
POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    method: str  # stop_command | ctrl-c | tmux kill-session | SIGINT | SIGTERM | SIGKILL | none
    text: str  # what was done (ok), or why it failed
    hint: str | None = None  # a command to stop it by hand, when there is one


class Stopper:
    def __init__(self, host: str, clock: Callable[[], float] = time.time) -> None:
        self.host = host
        self.clock = clock
        self._taken: set[str] = set()  # reply_as of every order started by this process
        self._done: queue.SimpleQueue[Event] = queue.SimpleQueue()

    def start(self, order: StopOrder, watch: RunWatch | None, seen: procfs.ProcStat | None = None) -> bool:
        """Carry out `order` in a thread; False when the same request is under way or done already.
        `seen`: the run's top process as the agent last followed it (the evidence a stop is done)."""
        if order.reply_as in self._taken:
            log.info("stop of %s (%s) is under way or done already; not repeated", order.run, order.request)
            return False
        self._taken.add(order.reply_as)
        thread = threading.Thread(target=self._work, args=(order, watch, seen), name=f"stop-{order.run}",
                                  daemon=True)  # fmt: skip
        thread.start()
        return True

    def finished(self) -> list[Event]:
        """The outcomes recorded since the last call, to publish."""
        out = []
        while not self._done.empty():
            out.append(self._done.get_nowait())
        return out

    def _work(self, order: StopOrder, watch: RunWatch | None, seen: procfs.ProcStat | None) -> None:
        try:
            outcome = carry_out(watch, host=self.host, run=order.run, seen=seen)
        except Exception as exc:  # recorded as a failure: the worker waiting for it must hear back
            log.exception("stopping %s failed", order.run)
            outcome = Outcome(False, "none", f"the agent on {self.host} failed: {type(exc).__name__}: {exc}")
        log.info("stop of %s: %s", order.run, outcome.text)
        self._done.put(self.event(order, watch, outcome))

    def event(self, order: StopOrder, watch: RunWatch | None, outcome: Outcome) -> Event:
        data: StopResultData = {"request": order.request, "method": outcome.method,
                                "session": watch.session if watch else None, "run_host": self.host,
                                "reason": order.reason}  # fmt: skip
        if order.by:
            data["by"] = order.by
        if outcome.ok:
            data["detail"] = outcome.text
        else:
            data["error"] = outcome.text
            if outcome.hint:
                data["hint"] = outcome.hint
        return make_event(t.STOP_DONE if outcome.ok else t.STOP_FAILED, run=order.run, host=self.host,
                          producer=order.reply_as, seq=1, data=data, ts=self.clock())  # fmt: skip


def carry_out(watch: RunWatch | None, *, host: str, run: str, seen: procfs.ProcStat | None = None) -> Outcome:
    if watch is None:
        return Outcome(False, "none", f"the agent on {host} does not watch {run} (it was never added there, or "
                       "it ended and was dropped)")  # fmt: skip
    if watch.stop_command:
        return run_stop_command(watch)
    if watch.session:
        return stop_session(watch.session, watch.tmux_socket, watch.stop_grace_s, seen=seen)
    if watch.pid is not None or watch.match:
        return signal_ladder(ProcessHealth(watch).roots(procfs.snapshot()), watch.stop_grace_s)
    return Outcome(False, "none", f"{run} was watched without a way to stop it: add it again with `trainwarden "
                   "watch RUN --log FILE --pid PID` (or --match, --tmux-session, --stop-command)")  # fmt: skip


def run_stop_command(watch: RunWatch) -> Outcome:
    argv = list(watch.stop_command or ())
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=STOP_COMMAND_TIMEOUT_S, check=False,
                              stdin=subprocess.DEVNULL, cwd=watch.workdir)  # fmt: skip
    except FileNotFoundError:
        return Outcome(False, "stop_command", f"stop_command not found: {argv[0]}")
    except subprocess.TimeoutExpired:
        return Outcome(False, "stop_command", f"stop_command did not finish in {STOP_COMMAND_TIMEOUT_S:.0f}s")
    if proc.returncode == 0:
        return Outcome(True, "stop_command", "stop_command exited 0")
    return Outcome(False, "stop_command", f"stop_command exited {proc.returncode}: {proc.stderr.strip()[-300:]}")


def _tmux(socket: str | None, *args: str) -> int:
    return subprocess.run(tmux_argv(socket, *args), capture_output=True, timeout=TMUX_TIMEOUT_S, check=False,
                          stdin=subprocess.DEVNULL, env=tmux_env()).returncode  # fmt: skip


def stop_session(session: str, socket: str | None, grace_s: float, *, seen: procfs.ProcStat | None) -> Outcome:
    """Ctrl-C, wait for the session to end, then kill it (the launch's procedure, remote/stop.py); done
    once `seen`, the process the agent followed in it, is gone."""
    kill = shlex.join(tmux_argv(socket, "kill-session", "-t", session))
    server = server_words(socket)
    if _tmux(socket, "has-session", "-t", f"={session}") != 0:
        if seen is None:
            return Outcome(False, "none", f"{server} has no session {session}, and the agent never saw the run's "
                           "processes: it cannot tell whether the run ended or lives on another tmux server; nothing "
                           "was stopped (add it again with --tmux-socket, or --pid)")  # fmt: skip
        if _alive(seen):
            return Outcome(False, "none", f"{server} has no session {session}, but the run's process (pid "
                           f"{seen.pid}) is still running: its session is on another tmux server; nothing was "
                           "stopped", hint=f"kill -INT {seen.pid}")  # fmt: skip
        return Outcome(True, "tmux kill-session", f"session {session} already ended")
    _tmux(socket, "send-keys", "-t", f"={session}:", "C-c")
    start = time.monotonic()
    while time.monotonic() - start < grace_s:
        if _tmux(socket, "has-session", "-t", f"={session}") != 0:
            return _verified(seen, session, Outcome(True, "ctrl-c", f"sent Ctrl-C to {session}; it exited after "
                                                    f"{time.monotonic() - start:.1f}s"))  # fmt: skip
        time.sleep(POLL_S)
    if _tmux(socket, "kill-session", "-t", f"={session}") == 0:
        return _verified(seen, session, Outcome(True, "tmux kill-session", f"Ctrl-C ignored for {grace_s:g}s; "
                                                f"killed tmux session {session}"))  # fmt: skip
    return Outcome(False, "tmux kill-session", f"could not kill tmux session {session}", hint=kill)


def _verified(seen: procfs.ProcStat | None, session: str, done: Outcome) -> Outcome:
    """`done` once the process the agent followed in the session is gone too."""
    if seen is None or _wait_gone([seen], KILL_WAIT_S):
        return done
    return Outcome(False, done.method, f"session {session} ended, but the run's process (pid {seen.pid}) is still "
                   f"running {KILL_WAIT_S:g}s later", hint=f"kill -KILL {seen.pid}")  # fmt: skip


def signal_ladder(roots: list[procfs.ProcStat], grace_s: float) -> Outcome:
    """SIGINT to `roots` and every process below them, as Ctrl-C in a terminal reaches a whole job
    (training loops save and exit; a wrapper script's python gets it too), then SIGTERM, then SIGKILL."""
    if not roots:
        return Outcome(True, "none", "no process of it was running: it had ended already")
    names = ", ".join(f"pid {r.pid} ({r.comm})" for r in roots)
    hint = f"kill -KILL {' '.join(str(r.pid) for r in roots)}"
    start = time.monotonic()
    tree = _tree(roots)
    try:
        for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
            _send(tree, sig)
            if _wait_gone(tree, grace_s):
                waited = time.monotonic() - start
                return Outcome(True, name, f"sent {name} to {names}{_count(tree)}; it exited after {waited:.1f}s")
        tree = [p for p in tree if _alive(p)] + [p for p in _tree(roots) if p not in tree]  # children born since
        _send(tree, signal.SIGKILL)
    except PermissionError:
        return Outcome(False, "none", f"the agent (user {os.getuid()}) may not signal {names}: run the agent as "
                       "the training's user", hint=hint)  # fmt: skip
    if _wait_gone(tree, KILL_WAIT_S):
        return Outcome(True, "SIGKILL", f"SIGINT and SIGTERM ignored for {grace_s:g}s each; killed {names}"
                       f"{_count(tree)} (SIGKILL)")  # fmt: skip
    return Outcome(False, "SIGKILL", f"{names} still there {KILL_WAIT_S:g}s after SIGKILL (stuck in the kernel?)",
                   hint=hint)  # fmt: skip


def _tree(roots: list[procfs.ProcStat]) -> list[procfs.ProcStat]:
    """The roots (while still the same processes: a pid is reused only after its process ended) and
    every live process below them."""
    procs = procfs.snapshot()
    out: dict[int, procfs.ProcStat] = {}
    for root in roots:
        now = procs.get(root.pid)
        if now is None or now.start_ticks != root.start_ticks:
            continue
        out.update((pid, procs[pid]) for pid in procfs.descendants(root.pid, procs))
    return list(out.values())


def _count(tree: list[procfs.ProcStat]) -> str:
    return f" ({len(tree)} processes)" if len(tree) > 1 else ""


def _alive(proc: procfs.ProcStat) -> bool:
    now = procfs.read_stat(proc.pid)
    return now is not None and now.start_ticks == proc.start_ticks and now.state != "Z"


def _send(procs: list[procfs.ProcStat], sig: signal.Signals) -> None:
    """To each live process once: a process that leads a group of its own (a job started from a shell)
    gets it with its group, and the group's members are not sent it again (a second SIGINT would
    interrupt the checkpoint the first one asked for)."""
    own_group = os.getpgid(0)
    groups: set[int] = set()
    for proc in procs:  # roots before their descendants (procfs.descendants)
        if not _alive(proc):
            continue
        with contextlib.suppress(ProcessLookupError):
            group = os.getpgid(proc.pid)
            if group in groups:
                continue
            if group == proc.pid != own_group:
                os.killpg(group, sig)
                groups.add(group)
            else:
                os.kill(proc.pid, sig)


def _wait_gone(procs: list[procfs.ProcStat], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if not any(_alive(p) for p in procs):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)

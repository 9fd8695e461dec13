"""Stopping a run: one small interface, the same stop procedure on this host and over SSH.

The procedure (the seed's): the run's `stop_command` if it has one; else Ctrl-C to its tmux
session, wait up to a grace period for it to exit, then kill the session. The target is the launch
record's: its session on its tmux server (trainwarden.core.tmux), and the pid of its wrapper.

A stop is done only when the run is gone. With the pid recorded, "gone" is checked on it: a session
that cannot be found while the pid lives is a failed stop (the session is on another tmux server
than the one asked), never "already ended"; a session that ended while the pid lives on is a failed
stop too. A run whose session and pid are both gone already is a no-op success.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from typing import Protocol

from trainwarden.core.tmux import UNSET_TMUX, server_words, tmux_argv, tmux_env
from trainwarden.events.payloads import RunLaunchedData
from trainwarden.remote.errors import StopError

STOP_COMMAND_TIMEOUT_S = 60.0
TMUX_TIMEOUT_S = 10.0
DEFAULT_GRACE_S = 10.0
POLL_S = 0.05
GONE_WAIT_S = 5.0  # after its session ended: the wrapper's pid is gone at once, but is given this long
NO_WAY_TO_STOP = (
    "the run has no tmux session or stop_command recorded in run.launched, and no agent watches it with a pid, "
    "match, tmux session or stop command (`trainwarden watch RUN --log FILE --pid PID` adds one)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StopTarget:
    run: str
    host: str
    server: str | None = None  # a server from servers.yaml: stop over SSH; None: this host
    session: str | None = None
    tmux_socket: str | None = None
    pid: int | None = None  # the launch wrapper's (the pane's) process: the evidence that the run is gone
    stop_command: tuple[str, ...] | None = None
    workdir: str | None = None  # where stop_command runs
    grace_s: float = DEFAULT_GRACE_S

    @classmethod
    def from_launch(cls, run: str, launch: RunLaunchedData, *, default_host: str) -> StopTarget:
        stop_command = launch.get("stop_command")
        return cls(
            run=run,
            host=launch.get("host") or default_host,
            server=launch.get("server"),
            session=launch.get("session"),
            tmux_socket=launch.get("tmux_socket"),
            pid=launch.get("pid"),
            stop_command=tuple(stop_command) if stop_command else None,
            workdir=launch.get("workdir"),
            grace_s=float(launch.get("stop_grace_s", DEFAULT_GRACE_S)),
        )


@dataclass(frozen=True, slots=True)
class StopResult:
    ok: bool
    method: str  # "stop_command" | "ctrl-c" | "tmux kill-session" | "none"
    detail: str


class RunController(Protocol):
    def stop(self, target: StopTarget) -> StopResult: ...

    def is_running(self, target: StopTarget) -> bool: ...


def session_name(run: str) -> str:
    """tmux turns '.' and ':' in session names into '_'; do it ourselves so we know the name."""
    return "train-" + run.replace(".", "_").replace(":", "_")


def stop_script(*, socket: str | None, session: str, grace_s: float, pid: int | None = None) -> str:
    """One shell script for the whole procedure, so a remote stop costs one SSH round trip:
    Ctrl-C, poll until the session is gone or `grace_s` passed, then kill it; with the wrapper's
    `pid`, done only once that process is gone too (module docstring)."""
    has = shlex.join(tmux_argv(socket, "has-session", "-t", f"={session}"))
    ticks = max(1, int(grace_s / POLL_S))
    lines = [UNSET_TMUX]
    if pid is None:  # nothing but the session to go by
        lines.append(f"gone() {{ :; }}; {has} 2>/dev/null || {{ echo ALREADY; exit 0; }}")
    else:  # /proc shows every user's processes (kill -0 would not); a zombie is gone
        alive = f"[ -d /proc/{pid} ] && ! grep -q '^State:.Z' /proc/{pid}/status 2>/dev/null"
        lines += [
            f"gone() {{ j=0; while {alive}; do [ $j -ge {int(GONE_WAIT_S / POLL_S)} ] && "
            f"{{ echo ALIVE {pid}; exit 1; }}; sleep {POLL_S}; j=$((j+1)); done; }}",
            f"{has} 2>/dev/null || {{ {alive} && {{ echo ELSEWHERE {pid}; exit 1; }}; echo ALREADY; exit 0; }}",
        ]
    return "\n".join([
        *lines,
        # A pane target: "=name:" is the session's current pane.
        shlex.join(tmux_argv(socket, "send-keys", "-t", f"={session}:", "C-c")),
        f"i=0; while [ $i -lt {ticks} ]; do {has} 2>/dev/null || {{ gone; echo EXITED $i; exit 0; }}; "
        f"sleep {POLL_S}; i=$((i+1)); done",
        f"{shlex.join(tmux_argv(socket, 'kill-session', '-t', f'={session}'))} && {{ gone; echo KILLED; exit 0; }}",
        f"{has} 2>/dev/null || {{ gone; echo KILLED; exit 0; }}",
        "echo FAILED; exit 1",
        "",
    ])  # fmt: skip


def parse_stop(output: str, stderr: str, *, session: str, grace_s: float, socket: str | None = None) -> StopResult:
    words = output.split()
    if words[:1] == ["ALREADY"]:
        return StopResult(True, "tmux kill-session", f"session {session} already ended")
    if words[:1] == ["EXITED"]:
        waited = int(words[1]) * POLL_S if len(words) > 1 and words[1].isdigit() else 0.0
        return StopResult(True, "ctrl-c", f"sent Ctrl-C to {session}; it exited after {waited:.1f}s")
    if words[:1] == ["KILLED"]:
        return StopResult(
            True, "tmux kill-session", f"Ctrl-C ignored for {grace_s:.0f}s; killed tmux session {session}"
        )
    pid = words[1] if len(words) > 1 else "?"
    if words[:1] == ["ELSEWHERE"]:
        return StopResult(False, "none", f"{server_words(socket)} has no session {session}, but the run's process "
                          f"(pid {pid}) is still running: its session is on another tmux server; nothing was "
                          "stopped")  # fmt: skip
    if words[:1] == ["ALIVE"]:
        return StopResult(False, "tmux kill-session", f"session {session} ended, but the run's process (pid {pid}) "
                          f"is still running {GONE_WAIT_S:g}s later")  # fmt: skip
    return StopResult(False, "tmux kill-session", f"could not stop {session}: {(stderr or output).strip()[-300:]}")


def running_script(socket: str | None, session: str) -> str:
    has = shlex.join(tmux_argv(socket, "has-session", "-t", f"={session}"))
    return f"{UNSET_TMUX}; {has} >/dev/null 2>&1 && echo RUNNING || echo GONE"


def judge_stop_command(status: int, stderr: str) -> StopResult:
    if status == 0:
        return StopResult(True, "stop_command", "stop_command exited 0")
    return StopResult(False, "stop_command", f"stop_command exited {status}: {stderr.strip()[-300:]}")


class LocalTmuxController:
    """Stops runs on this machine."""

    def stop(self, target: StopTarget) -> StopResult:
        if target.stop_command:
            return self._run_stop_command(target.stop_command, target.workdir)
        if not target.session:
            return StopResult(False, "none", NO_WAY_TO_STOP)
        script = stop_script(socket=target.tmux_socket, session=target.session, grace_s=target.grace_s,
                             pid=target.pid)  # fmt: skip
        proc = _run(["bash", "-c", script], target.grace_s + GONE_WAIT_S + TMUX_TIMEOUT_S)
        return parse_stop(proc.stdout, proc.stderr, session=target.session, grace_s=target.grace_s,
                          socket=target.tmux_socket)  # fmt: skip

    def is_running(self, target: StopTarget) -> bool:
        if not target.session:
            return False
        return _run(
            ["bash", "-c", running_script(target.tmux_socket, target.session)], TMUX_TIMEOUT_S
        ).stdout.startswith("RUNNING")

    @staticmethod
    def _run_stop_command(argv: tuple[str, ...], workdir: str | None) -> StopResult:
        # An argv list, never a shell string: nothing in it is interpreted.
        try:
            proc = _run(list(argv), STOP_COMMAND_TIMEOUT_S, cwd=workdir)
        except FileNotFoundError:
            return StopResult(False, "stop_command", f"stop_command not found: {argv[0]}")
        except subprocess.TimeoutExpired:
            return StopResult(False, "stop_command", f"stop_command did not finish in {STOP_COMMAND_TIMEOUT_S:.0f}s")
        return judge_stop_command(proc.returncode, proc.stderr)


class RoutingController:
    """Runs launched on a configured server are stopped over SSH; the rest on this host."""

    def __init__(self, *, local: RunController, remote: RunController | None) -> None:
        self.local = local
        self.remote = remote

    def stop(self, target: StopTarget) -> StopResult:
        if target.server is None:
            return self.local.stop(target)
        if self.remote is None:
            return StopResult(False, "none", f"run is on server {target.server!r} but no servers.yaml is configured")
        return self.remote.stop(target)

    def is_running(self, target: StopTarget) -> bool:
        if target.server is None:
            return self.local.is_running(target)
        if self.remote is None:
            raise StopError(
                f"run is on server {target.server!r} but no servers.yaml is configured: set servers_file "
                "in the settings file",
                run=target.run,
            )
        return self.remote.is_running(target)


def _run(argv: list[str], timeout: float, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
        cwd=cwd,
        env=tmux_env(),
    )

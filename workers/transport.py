"""Stopping a run: one small interface, a local tmux implementation (SSH comes behind the same one)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Any, Protocol

STOP_COMMAND_TIMEOUT_S = 60.0
TMUX_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StopTarget:
    run: str
    host: str
    session: str | None = None
    tmux_socket: str | None = None
    stop_command: tuple[str, ...] | None = None

    @classmethod
    def from_launch(cls, run: str, launch: dict[str, Any], *, default_host: str) -> StopTarget:
        stop_command = launch.get("stop_command")
        return cls(
            run=run,
            host=launch.get("host") or default_host,
            session=launch.get("session"),
            tmux_socket=launch.get("tmux_socket"),
            stop_command=tuple(stop_command) if stop_command else None,
        )


@dataclass(frozen=True, slots=True)
class StopResult:
    ok: bool
    method: str  # "stop_command" | "tmux kill-session" | "none"
    detail: str


class RunController(Protocol):
    def stop(self, target: StopTarget) -> StopResult: ...

    def is_running(self, target: StopTarget) -> bool: ...


def tmux_argv(socket: str | None, *args: str) -> list[str]:
    return ["tmux", *(["-L", socket] if socket else []), *args]


def session_name(run: str) -> str:
    """tmux turns '.' and ':' in session names into '_'; do it ourselves so we know the name."""
    return "train-" + run.replace(".", "_").replace(":", "_")


class LocalTmuxController:
    """Stops runs on this machine: the run's `stop_command` if it has one, else kill its tmux session."""

    def stop(self, target: StopTarget) -> StopResult:
        if target.stop_command:
            return self._run_stop_command(target.stop_command)
        if not target.session:
            return StopResult(False, "none", "the run has no tmux session or stop_command recorded in run.launched")
        if not self.is_running(target):
            return StopResult(True, "tmux kill-session", f"session {target.session} already ended")
        proc = _run(tmux_argv(target.tmux_socket, "kill-session", "-t", f"={target.session}"), TMUX_TIMEOUT_S)
        if proc.returncode == 0 or not self.is_running(target):
            return StopResult(True, "tmux kill-session", f"killed tmux session {target.session}")
        return StopResult(False, "tmux kill-session", f"tmux kill-session failed: {proc.stderr.strip()}")

    def is_running(self, target: StopTarget) -> bool:
        if not target.session:
            return False
        proc = _run(tmux_argv(target.tmux_socket, "has-session", "-t", f"={target.session}"), TMUX_TIMEOUT_S)
        return proc.returncode == 0

    def _run_stop_command(self, argv: tuple[str, ...]) -> StopResult:
        # An argv list, never a shell string: nothing in it is interpreted.
        try:
            proc = _run(list(argv), STOP_COMMAND_TIMEOUT_S)
        except FileNotFoundError:
            return StopResult(False, "stop_command", f"stop_command not found: {argv[0]}")
        except subprocess.TimeoutExpired:
            return StopResult(False, "stop_command", f"stop_command did not finish in {STOP_COMMAND_TIMEOUT_S:.0f}s")
        if proc.returncode == 0:
            return StopResult(True, "stop_command", "stop_command exited 0")
        return StopResult(False, "stop_command", f"stop_command exited {proc.returncode}: {proc.stderr.strip()[-300:]}")


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)

"""Launch a run on this machine in a detached tmux session and record `run.launched`.

The training command is an argv list; the shell line tmux runs is assembled with shlex.quote
from validated parts only, so no text from a user or a config is ever interpreted by a shell.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trainwarden.core.redact import env_secrets, known_secrets, redact
from trainwarden.core.sidecar import METRICS_ENV, metrics_path
from trainwarden.core.tmux import tmux_argv, tmux_env
from trainwarden.events import types as t
from trainwarden.events.control import send_control
from trainwarden.events.envelope import Event, check_run_name, make_event, time_seq
from trainwarden.events.errors import StoreError
from trainwarden.events.health import ping
from trainwarden.events.payloads import RunLaunchedData
from trainwarden.events.store import EventStore
from trainwarden.remote.errors import LaunchError
from trainwarden.remote.stop import session_name
from trainwarden.remote.wrapper import EXIT_SUFFIX, launch_env, recorded_run

STARTED_FORMAT = "#{socket_path} #{pane_pid}"
ENV_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchSpec:
    run: str
    command: tuple[str, ...]
    workdir: Path
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    tmux_socket: str | None = None
    stop_command: tuple[str, ...] | None = None
    config: Mapping[str, object] = field(default_factory=dict)
    wandb: bool | None = None  # False: the run does not use W&B (--no-wandb); None: the agent tells (agent.wandb_use)


def shell_line(spec: LaunchSpec) -> str:
    """`cd DIR`, then CMD with its output appended to LOG and its exit status kept in LOG.exit (remote/wrapper.py)."""
    exit_file = f"{spec.log_path}{EXIT_SUFFIX}"
    command = " ".join(shlex.quote(part) for part in spec.command)
    cd_failed = f"{{ echo 98 > {shlex.quote(exit_file)}; exit 98; }}"
    lines = [f"cd {shlex.quote(str(spec.workdir))} || {cd_failed}",
             *recorded_run(command, log=str(spec.log_path), exit_file=exit_file)]  # fmt: skip
    return "\n".join(lines)


def started(answer: str, asked: str | None) -> tuple[str | None, int | None]:
    """Pure: (the tmux server's socket path, the pane's pid) from `new-session -P -F STARTED_FORMAT`; the
    socket asked for and no pid when tmux (older than 2.2) gave no answer."""
    path, _, pid = answer.strip().rpartition(" ")
    if not path.startswith("/") or not pid.isdigit():
        return asked, None
    return path, int(pid)


def validate(spec: LaunchSpec) -> None:
    check_run_name(spec.run)
    if spec.run == t.SYSTEM_RUN:
        raise LaunchError(f"run name {t.SYSTEM_RUN!r} is reserved for trainwarden's own events; pick another",
                          run=spec.run)  # fmt: skip
    if not spec.command:
        raise LaunchError(
            "the launch command is empty: give it after --, e.g. `launch RUN -- python train.py`", run=spec.run
        )
    for name in spec.env:
        if not name or not set(name) <= ENV_NAME_CHARS or name[0].isdigit():
            raise LaunchError(
                f"invalid environment variable name {name!r}: use letters, digits and _, not starting with a digit",
                run=spec.run,
            )
    if not spec.workdir.is_dir():
        raise LaunchError(
            f"working directory {spec.workdir} does not exist: create it or pass another --workdir", run=spec.run
        )


def launch_local(spec: LaunchSpec, *, store: EventStore, host: str) -> Event:
    """Start the run; raises LaunchError (nothing recorded) if tmux refuses.

    Records `run.launched`, then registers the run with this host's agent through its control
    stream (message format: agent/watch.py). Nothing runs unwatched: an unreachable event log
    stops the launch before tmux starts (StoreUnavailable), and a record that fails after it
    started kills the session again (LaunchError).
    """
    validate(spec)
    session = session_name(spec.run)
    ping(store.redis, what="reach the event log before starting the run (nothing was started)", run=spec.run)
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{spec.log_path}{EXIT_SUFFIX}").unlink(missing_ok=True)  # an earlier launch's exit code is not this one's
    launched_at = time.time()
    metrics = Path(spec.workdir, spec.env.get(METRICS_ENV) or metrics_path(str(spec.log_path)))  # absolute stays
    env = {METRICS_ENV: str(metrics), **launch_env({k: v for k, v in spec.env.items() if k != METRICS_ENV})}
    env_args = [arg for name, value in env.items() for arg in ("-e", f"{name}={value}")]
    argv = tmux_argv(
        spec.tmux_socket, "new-session", "-d", "-P", "-F", STARTED_FORMAT, "-s", session, "-x", "200", "-y", "50",
        *env_args, "bash", "-c", shell_line(spec),
    )  # fmt: skip
    # No -L/-S: the server the caller's own tmux picks ($TMUX inside tmux, else the default), which tmux names
    # in its answer (with the pane's pid) atomically with the start; the record addresses that server alone.
    # A session of its own: the terminal's Ctrl-C cannot kill the tmux client between the start and its answer
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL, check=False,
                          start_new_session=True)  # fmt: skip
    if proc.returncode != 0:
        raise LaunchError(f"tmux could not start session {session}: {proc.stderr.strip()}", run=spec.run)
    socket, pid = started(proc.stdout, spec.tmux_socket)
    launched: RunLaunchedData = {
        "session": session,
        "tmux_socket": socket,
        "pid": pid,
        "host": host,
        "log_path": str(spec.log_path),
        "workdir": str(spec.workdir),
        "command": list(spec.command),
        "stop_command": list(spec.stop_command) if spec.stop_command else None,
        "env": dict(spec.env),
        "config": dict(spec.config),
    }
    if spec.wandb is not None:
        launched["uses_wandb"] = spec.wandb
    data = redact(launched, [*known_secrets(), *env_secrets(spec.env)])  # the run's own secrets too
    event = make_event(t.RUN_LAUNCHED, run=spec.run, host=host, producer=f"launch/{host}", seq=time_seq(), data=data)
    control = {"op": "watch", "run": spec.run, "log": str(spec.log_path), "session": session,
               "tmux_socket": socket or "", "pid": str(pid or ""), "workdir": str(spec.workdir), "launch": event.id,
               "launched_at": repr(launched_at), "metrics": str(metrics),
               "wandb": "" if spec.wandb is None else str(int(spec.wandb))}  # fmt: skip
    try:
        store.append_one(event)
        send_control(store.redis, store.keys, host, control, what="register the run with the agent", run=spec.run)
    except StoreError as exc:
        kill = tmux_argv(socket, "kill-session", "-t", f"={session}")
        killed = subprocess.run(kill, capture_output=True, timeout=15, stdin=subprocess.DEVNULL, check=False,
                                env=tmux_env()).returncode == 0  # fmt: skip
        then = (
            f"stopped it again (killed tmux session {session})"
            if killed
            else f"could not stop it: kill tmux session {session} by hand"
        )
        cause = f"Cause: {exc}"  # it names the run
        raise LaunchError(
            f"the run started but could not be recorded, so nothing would watch it; {then}. {cause}"
        ) from exc
    return event


def early_exit(spec: LaunchSpec, *, within_s: float, poll_s: float = 0.05) -> int | None:
    """The command's exit status if it ends within `within_s` of its launch (a typo, a missing file,
    an import error), read from the wrapper's exit file; None while it is still running."""
    exit_file = Path(f"{spec.log_path}{EXIT_SUFFIX}")
    deadline = time.monotonic() + within_s
    while True:
        try:
            text = exit_file.read_text().strip()
        except OSError:
            text = ""
        if text.lstrip("-").isdigit():
            return int(text)
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll_s)

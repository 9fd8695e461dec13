"""Is a launched run still going, and if not, how did it end? (exit file + tmux session, over SSH)

The launch wrapper writes the training command's exit status to `<log>.exit`. No exit file and
no tmux session means the run died without finishing (the machine rebooted, the session was
killed). The result becomes `run.finished` / `run.failed` with a deterministic id
(`exit/<run>:<attempt>`), so whoever notices first (this check, or the host's agent) records it
once. (Its seq is the `run.launched` event's seq.)
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from trainwarden.core.redact import redact_text
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.payloads import RunEndedData, RunLaunchedData
from trainwarden.remote.fleet import Server
from trainwarden.remote.runscript import tmux
from trainwarden.remote.ssh import RemoteShell

LOG_TAIL_LINES = 20


@dataclass(frozen=True, slots=True)
class Ended:
    exit_code: int | None  # None: died without writing one
    log_tail: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def judge(exit_text: str | None, session_alive: bool) -> int | bool | None:
    """Pure: True while running; else the exit code, or None when it died without one."""
    if exit_text is not None and exit_text.strip().lstrip("-").isdigit():
        return int(exit_text.strip())
    return True if session_alive else None


def check_remote_run(shell: RemoteShell, server: Server, launch: RunLaunchedData) -> Ended | None:
    """None while the run is going; else how it ended."""
    exit_file, log = launch["exit_file"], launch["log_path"]
    # The session is probed before the exit file is read. The wrapper writes the exit file and
    # then its session ends, so "gone" followed by "no exit file" really means it died without one.
    # (The other order misses a run that ends between the two probes and records exit code None.)
    command = (
        f"{tmux(server, 'has-session', '-t', '=' + launch['session'])} >/dev/null 2>&1 && echo ALIVE || echo GONE; "
        f"echo ---; cat {shlex.quote(exit_file)} 2>/dev/null || echo MISSING; "
        f"echo ---; tail -n {LOG_TAIL_LINES} {shlex.quote(log)} 2>/dev/null"
    )
    done = shell.run(server, command, timeout=30)
    alive_part, _, rest = done.stdout.partition("---\n")
    exit_part, _, tail = rest.partition("---\n")
    verdict = judge(None if "MISSING" in exit_part else exit_part, "ALIVE" in alive_part)
    if verdict is True:
        return None
    return Ended(exit_code=verdict if isinstance(verdict, int) else None, log_tail=tuple(tail.splitlines()))


def ended_event(run: str, launch: RunLaunchedData, launch_seq: int, ended: Ended, *, host: str, now: float) -> Event:
    """`run.finished` / `run.failed`; its seq is the launch's, so each launch ends exactly once."""
    attempt = int(launch.get("attempt", 1))
    data: RunEndedData = {"exit_code": ended.exit_code, "attempt": attempt, "launch": launch_seq}
    if not ended.ok:
        data["log_tail"] = [redact_text(line) for line in ended.log_tail]
        if ended.exit_code is None:
            data["reason"] = "the process is gone and left no exit code"
    return make_event(t.RUN_FINISHED if ended.ok else t.RUN_FAILED, run=run, host=host, producer=f"exit/{run}",
                      seq=launch_seq, data=data, ts=now)  # fmt: skip

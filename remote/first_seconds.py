"""The first seconds of a launch, local or over SSH: a command that fails at once (a typo, a missing
file, an import error, a bad argument) is reported then, with its exit status and last lines,
instead of "launched". One window for both; the wrapper's exit file (remote/wrapper.py) tells.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

WINDOW_S = 3.0  # a command that fails at once ends well within this
TAIL_LINES = 20
POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class EarlyExit:
    code: int
    after_s: float | None  # from the start of the command to its exit, when known
    tail: tuple[str, ...]


def watch_snippet(*, exit_file: str, pid_file: str, log: str, within_s: float) -> str:
    """Shell lines run on the server: wait up to `within_s` for the exit file; print RUNNING, or
    `EXIT code started ended` (mtimes of the pid file the run script writes first and of the exit
    file, both by the server's clock) and the log's last lines."""
    e, p, lg = shlex.quote(exit_file), shlex.quote(pid_file), shlex.quote(log)
    now_ms = "$(( $(date +%s%N) / 1000000 ))"  # by the clock, not by counting polls: a busy server polls slower
    return (
        f"end=$(( {now_ms} + {int(within_s * 1000)} ))\n"
        f"while ! [ -s {e} ] && [ {now_ms} -lt $end ]; do sleep {POLL_S}; done\n"
        f"[ -s {e} ] || {{ echo RUNNING; exit 0; }}\n"
        f"echo EXIT $(cat {e}) $(date -r {p} +%s.%N 2>/dev/null || echo -) $(date -r {e} +%s.%N)\n"
        f"tail -n {TAIL_LINES} {lg} 2>/dev/null\n"
    )


def parse_watch(stdout: str) -> EarlyExit | None:
    """Pure: what `watch_snippet` printed; None while the run goes on."""
    head, _, tail = stdout.partition("\n")
    words = head.split()
    if len(words) < 2 or words[0] != "EXIT" or not words[1].lstrip("-").isdigit():
        return None
    after = None
    if len(words) == 4 and all(w.replace(".", "", 1).isdigit() for w in words[2:]):
        after = max(0.0, float(words[3]) - float(words[2]))
    return EarlyExit(code=int(words[1]), after_s=after, tail=tuple(tail.splitlines()))

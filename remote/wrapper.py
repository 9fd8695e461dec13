"""The shell lines that run a training command inside its tmux session and always record how it ended.

A run's end is told by its exit file (`<log>.exit`): a run that vanished without one is judged
"died, exit code unknown". So the wrapper must write it however the command ends, also when the
wrapper itself is signalled:

- Ctrl-C (the stop procedure's first step) reaches the whole process group from the terminal:
  the trainer gets its KeyboardInterrupt, the wrapper traps INT and only waits for it.
- A killed tmux session hangs up on the wrapper alone (the session leader), and a TERM is usually
  sent to it alone: the wrapper passes either on to its group once, then waits.
- The command runs in the background so that `wait` can be interrupted by those traps; it gets its
  SIGINT back (a background job of a script starts with SIGINT ignored). `tee` ignores all three,
  so the trainer's last words (a traceback, "checkpoint saved") still reach the log, and its own
  status never hides the trainer's.

A command killed by signal N is recorded as 128+N (130 for Ctrl-C), the shell's convention. The
status recorded is always the one the command ended with, never the number of the signal that
interrupted the wrapper's `wait` (a trap's 128+N): a trainer that catches Ctrl-C, saves and exits 0
is recorded as 0, one killed by the HUP of a killed session as 129.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

EXIT_SUFFIX = ".exit"  # the exit file is the log's path plus this

# What every launched command gets in its environment unless the run's own env names the variable (an empty
# value says "leave Python buffered"). Its output goes through a pipe to `tee`, where Python block-buffers
# `print` (8 KB): a NaN would reach the log only when a buffer fills or the process exits, minutes late.
LAUNCH_ENV = {"PYTHONUNBUFFERED": "1"}


def launch_env(env: Mapping[str, str]) -> dict[str, str]:
    """The run's environment: LAUNCH_ENV's defaults, then `env` (which wins, also with an empty value)."""
    return {**LAUNCH_ENV, **env}


def recorded_run(command: str, *, log: str, exit_file: str) -> list[str]:
    """Lines that run `command` (already shell-quoted), append its output to `log` and write its
    exit status to `exit_file` on every end but kill -9 of the wrapper (`log` and `exit_file` are
    quoted here)."""
    return [
        "set -o pipefail",
        "trap 'tw_woken=1' INT",
        """trap 'tw_woken=1; [ -n "$tw_signalled" ] || { tw_signalled=1; kill -HUP 0; }' HUP""",
        """trap 'tw_woken=1; [ -n "$tw_signalled" ] || { tw_signalled=1; kill -TERM 0; }' TERM""",
        f"( trap - INT QUIT; exec -- {command} ) 2>&1 | ( trap '' INT TERM HUP; tee -a {shlex.quote(log)}; exit 0 ) &",
        # A trapped signal ends `wait` early with 128+N, its own number and not the job's status: wait again
        # until a `wait` no signal woke. Waiting for a job that ended meanwhile returns its status (bash keeps it).
        'while :; do tw_woken=; wait "$!"; tw_status=$?; [ -n "$tw_woken" ] || break; done',
        f'echo "$tw_status" > {shlex.quote(exit_file)}',
    ]

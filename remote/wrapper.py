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

A command killed by signal N is recorded as 128+N (130 for Ctrl-C), the shell's convention.
"""

from __future__ import annotations

import shlex

EXIT_SUFFIX = ".exit"  # the exit file is the log's path plus this


def recorded_run(command: str, *, log: str, exit_file: str) -> list[str]:
    """Lines that run `command` (already shell-quoted), append its output to `log` and write its
    exit status to `exit_file` on every end but kill -9 of the wrapper (`log` and `exit_file` are
    quoted here)."""
    return [
        "set -o pipefail",
        "trap ':' INT",
        """trap '[ -n "$tw_signalled" ] || { tw_signalled=1; kill -HUP 0; }' HUP""",
        """trap '[ -n "$tw_signalled" ] || { tw_signalled=1; kill -TERM 0; }' TERM""",
        f"( trap - INT QUIT; exec -- {command} ) 2>&1 | ( trap '' INT TERM HUP; tee -a {shlex.quote(log)}; exit 0 ) &",
        # A trapped signal ends `wait` early (status 128+N) while the job still runs: wait again. Only the
        # first `wait` that sees the job end returns the pipeline's status (pipefail: the command's).
        'while :; do wait "$!"; tw_status=$?; kill -0 "$!" 2>/dev/null || break; done',
        f'echo "$tw_status" > {shlex.quote(exit_file)}',
    ]

"""Python processes whose `print` is block-buffered into a pipe or a file, seen from /proc.

A Python process writing to a terminal flushes every line; writing to a pipe (`| tee`) or a file it
keeps 8 KB in a buffer, so a NaN reaches the log when the buffer fills or the process exits: minutes
late, or never for a run that prints a line every few seconds. `trainwarden launch` sets
PYTHONUNBUFFERED=1 for its runs (remote/wrapper.py); a process started by hand and handed to
`watch --pid` gets a warning that names the fix, from `buffered_pythons`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainwarden.agent.procfs import PROC, descendants, read_argv, read_environ, snapshot

FIX = "restart it with `python -u`, with PYTHONUNBUFFERED=1 in its environment, or print with `flush=True`"


@dataclass(frozen=True, slots=True)
class Buffered:
    pid: int
    command: str  # its command line, cut
    stdout: str  # what its stdout is: "a pipe" or "file PATH"


def is_python(argv: Sequence[str]) -> bool:
    """The program is a Python interpreter (python, python3, python3.11, a venv's python)."""
    name = os.path.basename(argv[0]) if argv else ""
    return name == "python" or (name.startswith("python") and name[6:].replace(".", "").isdigit())


def unbuffered_flag(argv: Sequence[str]) -> bool:
    """`-u` among the interpreter's own options (before the script, `-m` or `-c`), alone or combined (`-uB`)."""
    args = iter(argv[1:])
    for arg in args:
        if not arg.startswith("-") or arg in ("-", "--"):
            return False
        if arg.startswith("--"):  # --version, --help: no -u
            continue
        for i, letter in enumerate(arg[1:]):
            if letter == "u":
                return True
            if letter in "mc":  # what follows is the module or the code, not options
                return False
            if letter in "XWQ":  # an option with a value: glued (-Xdev) or the next argument
                if i == len(arg) - 2:
                    next(args, None)
                break
    return False


def stdout_kind(target: str) -> str | None:
    """What a process's fd 1 points at, from its /proc link: "a pipe", "file PATH", or None for a terminal
    (or anything else, where Python flushes by line or we cannot tell)."""
    if target.startswith("pipe:"):
        return "a pipe"
    if target.startswith("/") and not target.startswith("/dev/"):
        return f"file {target}"
    return None


def judge(argv: Sequence[str], environ: Mapping[str, str], stdout: str) -> str | None:
    """Pure: what the process's stdout is when its Python output is block-buffered, else None."""
    if not is_python(argv) or environ.get("PYTHONUNBUFFERED") or unbuffered_flag(argv):
        return None
    return stdout_kind(stdout)


def buffered_pythons(pid: int) -> list[Buffered]:
    """`pid` and the processes under it (a shell and the python it runs) whose print is block-buffered.
    Processes we may not read (another user's) are left out: this is advice, not a check."""
    out = []
    for each in descendants(pid, snapshot()) or [pid]:
        argv, environ = read_argv(each), read_environ(each)
        try:
            stdout = os.readlink(f"{PROC}/{each}/fd/1")
        except OSError:
            continue
        if not argv or environ is None:
            continue
        kind = judge(argv, environ, stdout)
        if kind is not None:
            out.append(Buffered(pid=each, command=" ".join(argv)[:80], stdout=kind))
    return out


def warning(found: Buffered) -> str:
    return (f"warning: pid {found.pid} ({found.command}) is Python writing to {found.stdout} without "
            "PYTHONUNBUFFERED: its print is block-buffered (8 KB), so a NaN reaches the log minutes late or only "
            f"when it exits; {FIX} (`trainwarden launch` sets PYTHONUNBUFFERED=1 for you)")  # fmt: skip

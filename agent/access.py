"""Whether the agent may reach a run's files, and why not: one run's directory it may not enter is that run's
problem, never the agent's.

The agent runs as a user (as on a GPU server): a run's log directory made private (`chmod 000`, a home
made private, an NFS re-mount) makes `stat` fail with EACCES, and Python 3.11's `Path.exists()` and
`is_dir()` raise on it. Every per-tick look at a run's files goes through `exists` / `is_dir` here
(an unreachable file is one that is not there, for this tick), and a read that fails becomes the run's
`source.status` (`log`: `unreachable`, with the directory and the user; `ok` once it reads again), said
once per change, not every tick (`LogAccess`).
"""

from __future__ import annotations

import errno
import os
import pwd
from pathlib import Path

from trainwarden.events.payloads import SourceStatusData

SOURCE = "log"  # `source` of the source.status events about whether the agent may read the run's log
UNREACHABLE = "unreachable"  # the status the `source-unreachable` policy rule WAITs on
OK = "ok"


def exists(path: Path) -> bool:
    """`path.exists()`, False (not raising) when the agent may not look: the file is not there for it."""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


def is_dir(path: Path) -> bool:
    """`path.is_dir()`, False (not raising) when the agent may not look."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def user() -> str:
    """The agent's user, by name (its uid when it has none)."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def blocking_dir(path: Path) -> Path:
    """The outermost directory above `path` the agent may not enter (`path` itself when it may enter them all)."""
    parts = Path(os.path.abspath(path)).parents
    for parent in reversed(parts):
        if not os.access(parent, os.X_OK):
            return parent
    return path


def reason(path: Path, exc: OSError) -> str:
    """Why the agent cannot read `path`, in one line a person can act on."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied on {blocking_dir(path)}: the agent runs as {user()}"
    return f"cannot read {path}: {exc.strerror or type(exc).__name__}"


class LogAccess:
    """Whether a run's log reads, as said in its events: once when it stops, once when it reads again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problem: str | None = None  # what was said last; None while the log reads (or nothing was said)

    def failed(self, exc: OSError) -> SourceStatusData | None:
        """The status to send after a failed read: None when the same was said already."""
        why = reason(self.path, exc)
        if why == self.problem:
            return None
        self.problem = why
        return {"source": SOURCE, "status": UNREACHABLE, "reason": why}

    def read(self) -> SourceStatusData | None:
        """The status to send after a read that worked: None unless a problem was said."""
        if self.problem is None:
            return None
        self.problem = None
        return {"source": SOURCE, "status": OK, "reason": f"the agent reads {self.path} again"}

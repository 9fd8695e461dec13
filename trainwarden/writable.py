"""The paths each daemon will write, and whether it can: checked at start and by `trainwarden config check`.

A path that cannot be written is found before it matters (a STOP's evidence, the agent's offsets),
named with the setting that sets it. The check creates nothing that stays: a directory is probed
with a nameless temporary file, a file is opened for append, and a missing path is judged by its
nearest existing ancestor. A real write answers for root too (a read-only mount, a path under a
regular file, /proc), which permission bits would not.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from trainwarden.settings import Settings

WORKER = "worker"
AGENT = "agent"
ARCHIVE = "archive"


@dataclass(frozen=True, slots=True)
class WritePath:
    setting: str  # as written in the settings file
    path: Path
    directory: bool
    role: str  # the command that writes it


def spool_dir(settings: Settings, state_file: Path) -> Path:
    """The agent's spool: `agent.spool_dir`, or `spool/` beside its state file."""
    return settings.agent_spool_dir or state_file.parent / "spool"


def paths_written(settings: Settings, *, state_file: Path | None = None) -> list[WritePath]:
    state = state_file or settings.agent_state_file
    return [
        WritePath("evidence_dir", settings.evidence_dir.resolve(), True, WORKER),
        WritePath("findings_file", settings.findings_file.resolve(), False, WORKER),
        WritePath("agent.state_file", state, False, AGENT),
        WritePath("agent.spool_dir", spool_dir(settings, state), True, AGENT),
        WritePath("archive_dir", settings.archive_dir.resolve(), True, ARCHIVE),
    ]


def write_problem(path: Path, *, directory: bool) -> str | None:
    """Why `path` (a directory, or a file to create or append to) cannot be written; None when it can."""
    try:
        if path.exists():
            if directory and not path.is_dir():
                return "exists and is not a directory"
            if not directory and path.is_dir():
                return "is a directory"
            if not directory and not path.is_file():
                return "is not a regular file (a pipe or a device: a write could wait forever)"
            return _probe(path) if directory else _probe_file(path)
        ancestor = path.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            return f"cannot be created: {ancestor} is not a directory"
        problem = _probe(ancestor)
        return f"cannot be created in {ancestor}: {problem}" if problem else None
    except OSError as exc:
        return f"cannot be checked: {exc}"


def _probe(directory: Path) -> str | None:
    """Create (and at once drop) a nameless file in `directory`: what the daemon's first write will do."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            return None
    except OSError as exc:
        return str(exc.strerror or exc)


def _probe_file(path: Path) -> str | None:
    try:
        with open(path, "ab"):  # appends nothing; opening for append is the check
            return None
    except OSError as exc:
        return str(exc.strerror or exc)


def problems(settings: Settings, role: str | None = None, *, state_file: Path | None = None) -> list[str]:
    """One line per path `role` (every role when None) cannot write, naming its setting."""
    out = []
    for p in paths_written(settings, state_file=state_file):
        if role is not None and p.role != role:
            continue
        problem = write_problem(p.path, directory=p.directory)
        if problem:
            kind = "directory" if p.directory else "file"
            out.append(f"{p.setting} {p.path} {problem}: set {p.setting} in the settings file to a writable {kind}")
    return out

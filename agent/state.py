"""The agent's saved state: how far each source was read, and the runs it was told to watch.

Saved (atomically, at most once a second) only when every event made so far is in Redis or in
the spool, so a restart after kill -9 resumes without a gap. Losing the file costs nothing but
re-reading: seqs come from offsets, so lines read again produce the same event ids and the store
drops them as duplicates.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainwarden.agent.errors import ControlMessageError
from trainwarden.agent.watch import RunWatch

log = logging.getLogger(__name__)

VERSION = 3
READS = (2, 3)  # versions read: a v2 file's logs have no fingerprint and no partial line, and are taken as they are


@dataclass(frozen=True, slots=True)
class Partial:
    """A last line without its terminator whose metrics were published (agent.logsource): when the completed line
    is read after a restart, only what it adds is sent, never a second sample of the same step."""

    start: int  # where the line starts (the saved offset)
    data: dict[str, float | int]  # the values published from it


@dataclass(frozen=True, slots=True)
class LogPosition:
    offset: int = 0
    generation: int = 0
    inode: int | None = None
    fingerprint: str | None = None  # of the bytes before `offset` (agent.tail.fingerprint_of): only what it covers
    partial: Partial | None = None

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> LogPosition:
        partial = raw.get("partial")
        return cls(offset=int(raw.get("offset", 0)), generation=int(raw.get("generation", 0)), inode=raw.get("inode"),
                   fingerprint=raw.get("fingerprint"),
                   partial=Partial(int(partial["start"]), dict(partial["data"])) if partial else None)  # fmt: skip


@dataclass(frozen=True, slots=True)
class WandbPosition:
    run_dir: str
    offset: int = 0


@dataclass(slots=True)
class AgentState:
    logs: dict[str, LogPosition] = field(default_factory=dict)
    wandb: dict[str, WandbPosition] = field(default_factory=dict)
    sidecars: dict[str, LogPosition] = field(default_factory=dict)  # sidecar metrics files, read like logs
    registered: dict[str, RunWatch] = field(default_factory=dict)  # from the control stream
    control_id: str = "0-0"  # last control-stream entry applied

    def to_json(self) -> str:
        return json.dumps(
            {
                "v": VERSION,
                "logs": {run: asdict(p) for run, p in self.logs.items()},
                "wandb": {run: asdict(p) for run, p in self.wandb.items()},
                "sidecars": {run: asdict(p) for run, p in self.sidecars.items()},
                "registered": {run: w.to_dict() for run, w in self.registered.items()},
                "control_id": self.control_id,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> AgentState:
        raw: dict[str, Any] = json.loads(text)
        if raw.get("v") not in READS:
            raise ValueError(f"state file version {raw.get('v')!r}, expected {VERSION}")
        return cls(
            logs={run: LogPosition.from_dict(p) for run, p in raw.get("logs", {}).items()},
            wandb={run: WandbPosition(**p) for run, p in raw.get("wandb", {}).items()},
            sidecars={run: LogPosition.from_dict(p) for run, p in raw.get("sidecars", {}).items()},
            registered={run: RunWatch.from_dict(w) for run, w in raw.get("registered", {}).items()},
            control_id=str(raw.get("control_id", "0-0")),
        )


def load(path: Path | None) -> AgentState:
    if path is None or not path.exists():
        return AgentState()
    try:
        return AgentState.from_json(path.read_text())
    except (ValueError, TypeError, KeyError, ControlMessageError) as exc:
        # A torn or foreign file: start over (safe, see above).
        log.warning("ignoring agent state file %s (%s); logs are read again from the start", path, exc)
        return AgentState()


def save(path: Path | None, state: AgentState, *, unless: bytes | None = None) -> bytes | None:
    """Write the state atomically, unless it is `unless` (what the last save wrote: a quiet agent rewrites
    nothing); returns what the file now holds. Raises OSError (a full disk) with the file as it was and no
    temporary left."""
    if path is None:
        return None
    data = state.to_json().encode()
    if data != unless:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
    return data


def write_atomic(path: Path, data: bytes) -> None:
    """`data` as `path`'s whole content, or the file as it was: through a temporary file, removed again when the
    disk refuses it (on a full disk a partial temporary file would hold on to the little room there is)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise

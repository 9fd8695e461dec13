"""The side effects an evaluation asks for, as typed records: one frozen dataclass per kind, registered once.

The evaluation (workers/evaluate.py) records them in the checkpoint's `pending` field, carried out after
its commit (workers/performers.py `perform`, by the kind's performer). The stored form is a JSON object per
action, `{"kind": ..., "sid": ..., "id": ..., <the kind's fields>}`, the same bytes as before these
records existed, so a checkpoint written by an older worker reads the same. Pure: no I/O, cheap to
import (evaluate.py runs in `trainwarden replay --verify` and the policy bench).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, dataclass_transform

from trainwarden.workers.errors import UnknownAction

# kind -> record class; filled by @pending_action, the one registration of a kind
KINDS: dict[str, type[PendingAction]] = {}
_R = TypeVar("_R", bound="PendingAction")


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingAction:
    """One side effect, asked for by the log entry at stream id `sid` (event id `id`)."""

    kind: ClassVar[str]
    omitted_when_none: ClassVar[frozenset[str]] = frozenset({"id"})  # keys absent from the stored form until set
    sid: str
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stored form: `kind` first, then the fields in declaration order."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None or f.name not in self.omitted_when_none:
                out[f.name] = value
        return out


@dataclass_transform(frozen_default=True, kw_only_default=True)
def pending_action(cls: type[_R]) -> type[_R]:
    """Make a record class a frozen dataclass and register it under its `kind` (once: a second class for
    one kind is a bug)."""
    if cls.kind in KINDS:
        raise ValueError(f"pending action kind {cls.kind!r} is declared twice: {KINDS[cls.kind]} and {cls}")
    record = dataclass(frozen=True, slots=True, kw_only=True)(cls)
    KINDS[cls.kind] = record
    return record


def from_dict(stored: Mapping[str, Any]) -> PendingAction:
    """The record a stored action stands for; keys it does not declare are ignored. Raises UnknownAction
    for a kind no class declares (a checkpoint written by a newer worker, or a corrupted one)."""
    cls = KINDS.get(str(stored.get("kind")))
    if cls is None:
        raise UnknownAction(stored.get("kind"), sorted(KINDS))
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in stored.items() if k in names})


@pending_action
class BuildEvidence(PendingAction):
    """A STOP decision's evidence pack (workers/evidence.py)."""

    kind = "evidence"


@pending_action
class StopRun(PendingAction):
    """A `stop.requested`: stop the run here, or (a watched run) ask its agent and wait for the answer
    without holding the turn: `sent` and `due` are set once asked."""

    kind = "stop"
    omitted_when_none = frozenset({"id", "sent", "due"})
    sent: float | None = None
    due: float | None = None


@pending_action
class Resume(PendingAction):
    """A resumable run's `run.failed`: relaunch it from its latest checkpoint."""

    kind = "resume"


@pending_action
class RequestDump(PendingAction):
    """A stall: ask the agent on `host` where the run is stuck (workers/dump_request.py)."""

    kind = "dump"
    host: str | None = None


@pending_action
class AddStacks(PendingAction):
    """A dump came: its stacks into the evidence pack at `pack` (workers/dump_request.py)."""

    kind = "stacks"
    pack: str = ""


@pending_action
class ChartAnomaly(PendingAction):
    """A critical anomaly's chart, drawn after every other action (workers/process.py)."""

    kind = "chart"
    rule: str | None = None


@dataclass(frozen=True, slots=True)
class Awaiting:
    """An action handed to another process: kept pending as `action` (what was done so far) until its
    outcome is in the log or `due`, when it is looked at again without news."""

    action: StopRun
    due: float

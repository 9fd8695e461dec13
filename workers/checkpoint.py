"""The per-run checkpoint: how far the workers read, the rule state, the run state, pending side effects.

It is written in the same MULTI/EXEC as the events an evaluation produces, so a job that dies
before the commit leaves no trace and a job that dies after it is not repeated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from trainwarden.events.projection import RunState
from trainwarden.policies.engine import PolicyState

ACTION_EVIDENCE = "evidence"
ACTION_STOP = "stop"
ACTION_RESUME = "resume"
ACTION_DUMP = "dump"  # a stall: ask the run's agent where it is stuck (workers/dump_request.py)
ACTION_STACKS = "stacks"  # a dump came: its stacks into the run's latest evidence pack (workers/dump_request.py)
ACTION_CHART = "chart"  # a critical anomaly's chart: after every other action (workers/process.py)


@dataclass(slots=True)
class Checkpoint:
    after: str | None = None  # last stream id processed
    emitted: int = 0  # events this run's evaluator has produced (their seq)
    policy: PolicyState = field(default_factory=PolicyState)
    run: RunState = field(default_factory=RunState)
    pending: list[dict[str, Any]] = field(default_factory=list)  # side effects to carry out, in order
    guard: dict[str, Any] | None = None  # a guarded STOP waiting for a person: decision id, rule, deadline
    dump: str | None = None  # stream id of the latest process.dump: its stacks go in a STOP's pack


def encode_checkpoint(cp: Checkpoint) -> dict[str, str]:
    return {
        "after": cp.after or "",
        "emitted": str(cp.emitted),
        "policy": json.dumps(cp.policy.to_dict()),
        "run": json.dumps(cp.run.to_dict()),
        "pending": json.dumps(cp.pending),
        "guard": json.dumps(cp.guard),
        "dump": cp.dump or "",
    }


def decode_checkpoint(fields: dict[bytes, bytes]) -> Checkpoint:
    if not fields:
        return Checkpoint()
    return Checkpoint(
        after=fields[b"after"].decode() or None,
        emitted=int(fields[b"emitted"]),
        policy=PolicyState.from_dict(json.loads(fields[b"policy"])),
        run=RunState.from_dict(json.loads(fields[b"run"])),
        pending=json.loads(fields[b"pending"]),
        guard=json.loads(fields.get(b"guard", b"null")),
        dump=fields.get(b"dump", b"").decode() or None,
    )


def awaiting_due(pending: list[dict[str, Any]]) -> float | None:
    """When the first action handed to another process (workers/actions.py `Awaiting`) is to be looked at
    again without news; None: none is."""
    dues = [float(a["due"]) for a in pending if "due" in a]
    return min(dues) if dues else None

"""The per-run checkpoint: how far the workers read, the rule state, the run state, pending side effects.

It is written in the same MULTI/EXEC as the events an evaluation produces, so a job that dies
before the commit leaves no trace and a job that dies after it is not repeated.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from trainwarden.events.projection import RunState, decode_state, encode_state
from trainwarden.policies.engine import PolicyState
from trainwarden.workers.pending import ChartAnomaly
from trainwarden.workers.state_parts import decode_policy, encode_policy

ACTION_CHART = ChartAnomaly.kind  # a critical anomaly's chart: after every other action (workers/process.py)


@dataclass(slots=True)
class Checkpoint:
    after: str | None = None  # last stream id processed
    emitted: int = 0  # events this run's evaluator has produced (their seq)
    policy: PolicyState = field(default_factory=PolicyState)
    run: RunState = field(default_factory=RunState)
    # side effects to carry out, in order: the stored form of workers/pending.py's records (`to_dict`)
    pending: list[dict[str, Any]] = field(default_factory=list)
    guard: dict[str, Any] | None = None  # a guarded STOP waiting for a person: decision id, rule, deadline
    dump: str | None = None  # stream id of the latest process.dump: its stacks go in a STOP's pack
    # the policy state's parts as stored (workers/state_parts.py): a write sends only the rules that differ
    stored: dict[str, bytes] | None = field(default=None, compare=False, repr=False)
    # the other fields as stored (`_FIELDS`): likewise, a write sends those that differ (None: all of them)
    stored_fields: dict[str, bytes] | None = field(default=None, compare=False, repr=False)


_FIELDS = ("after", "emitted", "run", "recent", "pending", "guard", "dump")
_FIELDS_B = tuple(name.encode() for name in _FIELDS)


@dataclass(slots=True)
class CheckpointWrite:
    """The hash fields to set (`v` a fresh version) and those to delete (rules that left the state)."""

    fields: dict[str, str | bytes]
    drop: list[str]

    @property
    def version(self) -> str:
        return str(self.fields["v"])

    def applied(self, stored: dict[bytes, bytes] | None = None) -> dict[bytes, bytes]:
        """The hash `stored` becomes (a copy) once this write is committed: HDEL of `drop`, then HSET."""
        out = dict(stored or {})
        for name in self.drop:
            out.pop(name.encode(), None)
        out.update({k.encode(): v if isinstance(v, bytes) else v.encode() for k, v in self.fields.items()})
        return out


def encode_checkpoint(cp: Checkpoint) -> CheckpointWrite:
    """The write that stores `cp`; `v` is a fresh version, so that a process that kept the checkpoint it wrote
    can tell whether the stored one is still that one (workers/batch.py's cache) without reading it.

    The policy state goes in parts, only the rules that changed since `cp.stored` (workers/state_parts.py), and
    of the other fields only those that differ from `cp.stored_fields`; both become what is stored once this
    write is committed, so a checkpoint whose commit failed is read again, never written from (as the workers
    do: a WatchError drops the object). A write of the pending actions alone (`CheckpointTx.write_pending`) is
    made on a checkpoint read for it and dropped after, and the cache holds none whose `pending` moved."""
    run, recent = encode_state(cp.run)
    policy = encode_policy(cp.policy, cp.stored)
    cp.stored = policy.stored
    values = (cp.after or "", str(cp.emitted), run, recent, json.dumps(cp.pending), json.dumps(cp.guard),
              cp.dump or "")  # fmt: skip
    now = {name: value.encode() for name, value in zip(_FIELDS, values, strict=True)}
    before, cp.stored_fields = cp.stored_fields, now
    fields: dict[str, str | bytes] = {"v": uuid.uuid4().hex}
    if before is None:
        fields.update(now)
    else:  # a healthy turn: after, run and recent; pending, guard, dump and emitted seldom change
        fields.update({name: data for name, data in now.items() if before.get(name) != data})
    fields.update(policy.fields)
    return CheckpointWrite(fields, policy.drop)


def decode_checkpoint(fields: dict[bytes, bytes], salvage: Checkpoint | None = None) -> Checkpoint:
    """A checkpoint's hash fields back; a policy state stored whole (JSON, before the parts) is read too.
    `salvage`: an older checkpoint this process committed (`CheckpointCache.drop`), whose rules that are still
    stored as it wrote them are taken as they are (workers/state_parts.py `decode_policy`)."""
    if not fields:
        return Checkpoint()
    held = (salvage.policy, salvage.stored) if salvage is not None and salvage.stored is not None else None
    policy, stored = decode_policy(fields, held)
    return Checkpoint(
        after=fields[b"after"].decode() or None,
        emitted=int(fields[b"emitted"]),
        policy=policy,
        run=decode_state(fields[b"run"], fields.get(b"recent")),
        pending=json.loads(fields[b"pending"]),
        guard=json.loads(fields.get(b"guard", b"null")),
        dump=fields.get(b"dump", b"").decode() or None,
        stored=stored,
        stored_fields={name: fields[raw] for name, raw in zip(_FIELDS, _FIELDS_B, strict=True) if raw in fields},
    )


def awaiting_due(pending: list[dict[str, Any]]) -> float | None:
    """When the first action handed to another process (workers/actions.py `Awaiting`) is to be looked at
    again without news; None: none is."""
    dues = [float(a["due"]) for a in pending if "due" in a]
    return min(dues) if dues else None


class CheckpointCache:
    """Checkpoints this process committed, by run, with the version (`v`) written with them: a job that
    finds the run's stored version unchanged evaluates on from the object it holds instead of decoding
    the stored one again (about 0.2 ms a run: JSON of the rule windows and recent metrics).

    Every full write of a checkpoint (`encode_checkpoint`) writes a new version; a write of the pending
    actions alone does not, so a cached checkpoint is used only while the stored `pending` is empty, as
    it was when cached. A checkpoint is taken out while it is evaluated (it is changed in place) and
    put back only once its commit succeeded. At most `max_runs`, the least recently put dropped first.
    """

    def __init__(self, *, max_runs: int) -> None:
        self.max_runs = max_runs
        self._items: dict[str, tuple[str, Checkpoint]] = {}

    def version(self, run: str) -> str:
        """The version of the checkpoint held for `run`; '' when none is."""
        item = self._items.get(run)
        return item[0] if item is not None else ""

    def take(self, run: str, version: str) -> Checkpoint | None:
        """The checkpoint held for `run` if it is `version`, no longer held (put it back after the commit)."""
        item = self._items.pop(run, None)
        return item[1] if item is not None and item[0] == version else None

    def drop(self, run: str) -> Checkpoint | None:
        """The checkpoint held for `run`, whatever its version, no longer held: what a stale one can still give
        (`decode_checkpoint(salvage=)`)."""
        item = self._items.pop(run, None)
        return item[1] if item is not None else None

    def put(self, run: str, version: str, cp: Checkpoint) -> None:
        self._items.pop(run, None)
        self._items[run] = (version, cp)
        while len(self._items) > self.max_runs:
            del self._items[next(iter(self._items))]

    def __len__(self) -> int:
        return len(self._items)

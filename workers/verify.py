"""`trainwarden replay RUN --verify`: re-evaluate a run's recorded events with the recorded policies
and report every evaluator output that differs from the log.

The log says which policy evaluated which entries: each `policy.applied` event names its policy's
hash and the first entry it evaluated (`from`). Re-evaluation feeds the same entries, split at
the same places, through the same pure step the worker runs (`evaluate_entries`), from an empty
checkpoint; since the engine takes time only from events, the outputs must match one for one
(id, type and data; not the wall-clock `ts` nor the worker's host).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest

from trainwarden.events import types as t
from trainwarden.events.codec import encode
from trainwarden.events.envelope import Event
from trainwarden.events.projection import apply
from trainwarden.events.store import Malformed
from trainwarden.policies.model import Policy
from trainwarden.workers.checkpoint import Checkpoint
from trainwarden.workers.evaluate import evaluate_entries, evaluator_producer

Entries = Sequence[tuple[str, Event | Malformed]]


@dataclass(frozen=True, slots=True)
class Difference:
    position: int  # among the run's evaluator outputs
    recorded: Event | None
    recomputed: Event | None

    def describe(self) -> str:
        return f"output #{self.position + 1}: recorded {_show(self.recorded)}; re-evaluated {_show(self.recomputed)}"


@dataclass(slots=True)
class Verification:
    outputs: int = 0  # evaluator outputs recorded in the log
    decisions: int = 0
    policies: list[str] = field(default_factory=list)
    unevaluated: int = 0  # entries before the first policy.applied (logs older than policy records)
    differences: list[Difference] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences


def _show(event: Event | None) -> str:
    if event is None:
        return "nothing"
    d = event.data
    what = d.get("decision") or d.get("rule") or d.get("policy") or ""
    why = d.get("reason") or d.get("trigger")
    return f"{event.type} {event.id} {what}" + (f" ({why})" if why else "")


def _key(event: Event) -> tuple[str, str, bytes]:
    return event.id, event.type, encode(Event(id="", type="", run="", host="", ts=0.0, seq=0, data=event.data))


def verify_run(run: str, entries: Entries, policy_for: Callable[[str], Policy]) -> Verification:
    """`policy_for(hash)` returns the recorded policy (raising when it cannot be found)."""
    producer = evaluator_producer(run)
    recorded = [e for _, e in entries if isinstance(e, Event) and e.producer == producer]
    position = {sid: i for i, (sid, _) in enumerate(entries)}
    switches = [(position[e.data["from"]], e.data["policy"]) for e in recorded
                if e.type == t.POLICY_APPLIED and e.data.get("from") in position]  # fmt: skip
    result = Verification(outputs=len(recorded), decisions=sum(e.type == t.DECISION for e in recorded))
    cp = Checkpoint()
    start = switches[0][0] if switches else len(entries)
    for _, item in entries[:start]:
        if isinstance(item, Event):
            apply(cp.run, item)
    result.unevaluated = start
    recomputed: list[Event] = []
    for k, (begin, digest) in enumerate(switches):
        end = switches[k + 1][0] if k + 1 < len(switches) else len(entries)
        policy = policy_for(digest)
        result.policies.append(digest)
        recomputed += evaluate_entries(policy, cp, entries[begin:end], run=run, host="verify", now=0.0).outputs
    for i, (old, new) in enumerate(zip_longest(recorded, recomputed)):
        if old is None or new is None or _key(old) != _key(new):
            result.differences.append(Difference(position=i, recorded=old, recomputed=new))
    return result

"""A threshold rule's STOP waits for its outcome before it is posted (#38 item 3: the stop breaker in Slack).

A wrong policy that the breaker holds fifty times once posted fifty ANOMALY parents and fifty STOPs, each then
edited to say it was held: the channel flooded all the same. So the notifier folds a run's log only up to the
anomaly opening of a policy STOP that can be held (not a fault rule's: a NaN, a crash in the log is posted at
once) until the run's outcome for it is in the log: `stop.done` / `stop.failed` (posted as always, late by the
workers' turn, tens of ms), or `stop.held` (its anomaly and STOP are not posted: the one STOP BREAKER message
lists the run, bot/breaker_notice.py). Past `slack.stop_outcome_wait_s` without an outcome (workers down, an
agent slow to stop a watched run) it is posted as before: a STOP is late at worst, never unsaid.

Which rule is a fault rule is the policy's that decided (the decision's `policy` hash), loaded as a replay
loads it (ops/replay.py); a policy the log does not hold counts as fault: posted at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from trainwarden.core.errors import PolicyNotRecorded
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.payloads import DecisionData, StopHeldData
from trainwarden.events.store import EventStore, Malformed
from trainwarden.ops.replay import RecordedPolicies
from trainwarden.policies.model import Policy

# After one of these, the STOP decided before it has its outcome (a run's actions are carried out in order).
OUTCOMES = frozenset({t.STOP_DONE, t.STOP_FAILED, t.STOP_HELD, t.STOP_CANCELLED, t.RUN_FINISHED, t.RUN_FAILED})

Items = Sequence[tuple[str, Event | Malformed]]


def holdable(event: Event) -> bool:
    """A STOP the workers carry out without asking (pure): the breaker may hold it, unless its rule is a fault."""
    if event.type != t.DECISION:
        return False
    decided = cast(DecisionData, event.data)
    return decided.get("decision") == t.STOP and not decided.get("confirm_s")


def unsettled(items: Items) -> list[int]:
    """Indexes of the holdable STOPs in `items` with no outcome after them there (pure)."""
    last = max((i for i, (_, e) in enumerate(items) if isinstance(e, Event) and e.type in OUTCOMES), default=-1)
    return [i for i, (_, e) in enumerate(items) if i > last and isinstance(e, Event) and holdable(e)]


def opening(decision: Event, event: Event | Malformed) -> bool:
    """Whether `event` opened the anomaly `decision` is about (pure): the decision's `anomaly` is the id of the
    input that opened the rule, which is that opening's `trigger`."""
    decided = cast(DecisionData, decision.data)
    if not isinstance(event, Event) or event.type != t.ANOMALY_OPENED or not decided.get("anomaly"):
        return False
    return event.data.get("rule") == decided.get("rule") and event.data.get("trigger") == decided.get("anomaly")


def turn_start(items: Items, i: int) -> int:
    """Where the STOP at `i` begins in `items` (pure): its anomaly's opening, when that is among them."""
    decision = cast(Event, items[i][1])
    return next((j for j, (_, e) in enumerate(items[:i]) if opening(decision, e)), i)


def held_quiet(items: Items) -> frozenset[str]:
    """Ids of the events in `items` whose posts a `stop.held` among them makes quiet (pure): each held STOP, the
    opening of its anomaly and its evidence pack's sharing. The STOP BREAKER message lists the run instead."""
    decisions = {e.id: e for _, e in items if isinstance(e, Event) and e.type == t.DECISION}
    quiet: set[str] = set()
    for i, (_, e) in enumerate(items):
        if isinstance(e, Event) and e.type == t.STOP_HELD:
            decision = decisions.get(cast(StopHeldData, e.data).get("decision") or "")
            if decision is not None:
                quiet.add(decision.id)
                quiet.update(o.id for _, o in items[:i] if isinstance(o, Event) and opening(decision, o))
    packs = (e.id for _, e in items if isinstance(e, Event) and e.type in (t.EVIDENCE_BUILT, t.EVIDENCE_FAILED)
             and e.data.get("decision") in quiet)  # fmt: skip
    return frozenset(quiet.union(packs))


class FaultRules:
    """Whether a decision's rule is a fault rule, per the policy that decided; policies cached by hash."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.known: dict[str, Policy | None] = {}

    def fault(self, event: Event) -> bool:
        decided = cast(DecisionData, event.data)
        digest = decided.get("policy")
        if not digest:
            return True
        if digest not in self.known:
            try:
                self.known[digest] = RecordedPolicies(self.store).get(digest)
            except PolicyNotRecorded:
                self.known[digest] = None  # built in code, or not recorded: post at once
        policy = self.known[digest]
        rule = next((r for r in policy.rules if r.id == decided.get("rule")), None) if policy else None
        return rule is None or rule.fault

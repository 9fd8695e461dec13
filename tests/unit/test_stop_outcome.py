"""Which posts of a STOP wait for its outcome, and which a `stop.held` makes quiet (bot/stop_outcome.py), over
what the real evaluation writes (workers/evaluate.py): the decision names its anomaly by the input that opened
the rule, which is the opening's `trigger`."""

from __future__ import annotations

from trainwarden.bot.stop_outcome import held_quiet, turn_start, unsettled
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.workers.checkpoint import Checkpoint
from trainwarden.workers.evaluate import evaluate_entries

from tests.unit.test_breaker import POLICY, metric


def test_the_held_stop_and_its_anomaly_opening_are_quiet_and_a_done_stop_is_settled():
    written = evaluate_entries(POLICY, Checkpoint(), [("1-0", metric(1, step=1, loss=2.0))], run="r", host="w", now=1.0)
    items = [(f"{i}-1", e) for i, e in enumerate(written.outputs, start=2)]
    types = [e.type for _, e in items]
    decision = next(e for _, e in items if e.type == t.DECISION and e.data["decision"] == t.STOP)
    (i,) = unsettled(items)
    assert types[i] == t.DECISION and types[turn_start(items, i)] == t.ANOMALY_OPENED
    opening = items[turn_start(items, i)][1]
    held = make_event(t.STOP_HELD, run="r", host="w", producer="act/r", seq=1, ts=2.0,
                      data={"decision": decision.id, "rule": "loss-too-high"})  # fmt: skip
    pack = make_event(t.EVIDENCE_BUILT, run="r", host="w", producer="act/r", seq=2, ts=2.0,
                      data={"decision": decision.id, "path": "/p"})  # fmt: skip
    after = [*items, ("20-0", pack), ("21-0", held)]
    assert unsettled(after) == []
    assert held_quiet(after) == {decision.id, opening.id, pack.id}
    done = make_event(t.STOP_DONE, run="r", host="w", producer="act/r", seq=3, ts=2.0, data={})
    assert unsettled([*items, ("20-0", done)]) == [] and held_quiet([*items, ("20-0", done)]) == frozenset()

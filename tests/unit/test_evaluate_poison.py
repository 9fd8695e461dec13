"""A payload that breaks the engine is dead-lettered, one that breaks the run view is skipped; the run goes on."""

import math

from trainwarden.events import types as t
from trainwarden.events.codec import FIELD_BYTES, encode
from trainwarden.events.envelope import make_event
from trainwarden.events.projection import RunState, apply
from trainwarden.policies.default import default_policy
from trainwarden.workers.checkpoint import Checkpoint
from trainwarden.workers.evaluate import evaluate_entries


def event(seq, event_type=t.METRIC, **data):
    return make_event(event_type, run="r", host="gpu1", producer="gpu1/x/r", seq=seq, data=data, ts=float(seq))


def test_a_payload_the_engine_cannot_read_is_dead_lettered_and_the_nan_after_it_stopped():
    bad = event(2, t.DECISION, decision=t.STOP, confirm_s="soon", rule="x", reason="y")  # ts + "soon" raises
    items = [("1-0", event(1, loss=1.0)), ("2-0", bad), ("3-0", event(3, step=3, loss=math.nan))]
    out = evaluate_entries(default_policy(), Checkpoint(), items, run="r", host="w1", now=9.0)
    (dead,) = out.dead
    assert dead.sid == "2-0" and dead.reason.startswith("cannot be evaluated: TypeError")
    assert dead.fields[FIELD_BYTES] == encode(bad)  # what is kept is the entry itself
    assert t.STOP_REQUESTED in [e.type for e in out.outputs]


def test_the_run_view_skips_a_payload_of_the_wrong_shape():
    state = RunState()
    apply(state, event(1, t.ANOMALY_OPENED, rule={"not": "a name"}))
    apply(state, event(2, step=2, loss=1.0))
    assert state.event_count == 2 and state.step == 2

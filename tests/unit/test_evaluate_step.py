import math

from events import types as t
from events.envelope import make_event
from events.store import Malformed
from policies.default import default_policy
from workers.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from workers.evaluate import evaluate_entries


def metric(seq, **data):
    return make_event(t.METRIC, run="r", host="gpu1", producer="gpu1/log/r/g0", seq=seq, data=data, ts=float(seq))


def entries(*events):
    return [(f"{i}-0", e) for i, e in enumerate(events, start=1)]


def step(cp, items):
    return evaluate_entries(default_policy(), cp, items, run="r", host="w1", now=123.0)


def test_nan_produces_anomaly_decision_and_stop_request_with_deterministic_ids():
    cp = Checkpoint()
    out = step(cp, entries(metric(1, loss=1.0), metric(2, loss=math.nan))).outputs
    assert [(e.type, e.id) for e in out] == [
        (t.DECISION, "eval/r:1"),
        (t.ANOMALY_OPENED, "eval/r:2"),
        (t.DECISION, "eval/r:3"),
        (t.STOP_REQUESTED, "eval/r:4"),
    ]
    assert out[3].data["decision"] == "eval/r:3"
    assert all(e.data["run_host"] == "gpu1" for e in out)
    assert cp.after == "2-0"
    assert cp.emitted == 4


def test_same_input_same_output_after_a_checkpoint_round_trip():
    items = entries(metric(1, loss=1.0), metric(2, loss=math.nan))
    first = step(Checkpoint(), items).outputs
    cp = decode_checkpoint({k.encode(): v.encode() for k, v in encode_checkpoint(Checkpoint()).items()})
    assert step(cp, items).outputs == first


def test_stop_decisions_and_requests_read_back_become_pending_actions():
    cp = Checkpoint()
    stop = make_event(t.DECISION, run="r", host="w1", producer="eval/r", seq=3, data={"decision": "STOP"})
    request = make_event(t.STOP_REQUESTED, run="r", host="w1", producer="eval/r", seq=4, data={"by": "policy"})
    step(cp, [("5-0", stop), ("6-0", request)])
    assert cp.pending == [
        {"kind": "evidence", "sid": "5-0", "id": "eval/r:3"},
        {"kind": "stop", "sid": "6-0", "id": "eval/r:4"},
    ]


def test_malformed_entries_are_collected_and_passed():
    cp = Checkpoint()
    bad = Malformed(sid="2-0", reason="not valid JSON", fields={b"e": b"{"})
    result = step(cp, [("1-0", metric(1, loss=1.0)), ("2-0", bad), ("3-0", metric(3, loss=math.nan))])
    assert result.dead == [bad]
    assert cp.after == "3-0"
    assert any(e.type == t.STOP_REQUESTED for e in result.outputs)

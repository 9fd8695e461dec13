import math

from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.store import Malformed
from trainwarden.policies.default import default_policy
from trainwarden.workers.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from trainwarden.workers.evaluate import evaluate_entries


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
        (t.POLICY_APPLIED, "eval/r:1"),
        (t.DECISION, "eval/r:2"),
        (t.ANOMALY_OPENED, "eval/r:3"),
        (t.DECISION, "eval/r:4"),
        (t.STOP_REQUESTED, "eval/r:5"),
    ]
    assert out[0].data == {"policy": default_policy().hash, "name": "default", "previous": None, "from": "1-0"}
    assert out[4].data["decision"] == "eval/r:4"
    assert all(e.data["run_host"] == "gpu1" for e in out[1:])
    assert cp.after == "2-0"
    assert cp.emitted == 5


def test_a_new_policy_is_recorded_from_the_first_entry_it_evaluates():
    from trainwarden.policies.loader import load_policy

    cp = Checkpoint()
    step(cp, entries(metric(1, loss=1.0)))
    other = load_policy("name: other\nrules:\n  - {id: x, kind: nonfinite, metric: loss}\n", source="x")
    out = evaluate_entries(other, cp, [("7-0", metric(2, loss=1.0))], run="r", host="w1", now=1.0).outputs
    assert [(e.type, e.data.get("from"), e.data.get("previous")) for e in out] == [
        (t.POLICY_APPLIED, "7-0", default_policy().hash)
    ]


def test_same_input_same_output_after_a_checkpoint_round_trip():
    items = entries(metric(1, loss=1.0), metric(2, loss=math.nan))
    first = step(Checkpoint(), items).outputs
    cp = decode_checkpoint(encode_checkpoint(Checkpoint()).applied())
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


def test_a_critical_anomaly_read_back_asks_for_its_chart_unless_a_stop_comes_first():
    def out(seq, typ, **data):
        return make_event(typ, run="r", host="w1", producer="eval/r", seq=seq, data=data)

    cp = Checkpoint()
    step(cp, [("0-1", metric(1, step=1, loss=1.0, grad_norm=180.0))])
    step(cp, [
        ("1-0", out(1, t.ANOMALY_OPENED, rule="gn", severity="critical", values={"grad_norm": 180.0})),
        ("1-1", out(6, t.ANOMALY_OPENED, rule="oom", severity="critical", values={"line": "CUDA out of memory"})),
        ("2-0", out(2, t.ANOMALY_OPENED, rule="spike", severity="warning", values={"loss": 9.0})),
        ("3-0", out(3, t.ANOMALY_OPENED, rule="nan", severity="critical", values={"loss": math.nan})),
        ("4-0", out(4, t.ANOMALY_OPENED, rule="shadowed", severity="critical", values={"loss": 9.0}, shadow=True)),
    ])  # fmt: skip
    assert cp.pending == [  # critical, with a metric to draw, posted (not shadow)
        {"kind": "chart", "sid": "1-0", "id": "eval/r:1", "rule": "gn"},
        {"kind": "chart", "sid": "3-0", "id": "eval/r:3", "rule": "nan"},
    ]
    step(cp, [("5-0", out(5, t.DECISION, decision="STOP", rule="nan"))])
    assert cp.pending == [{"kind": "evidence", "sid": "5-0", "id": "eval/r:5"}]  # the STOP's pack: one chart


def test_malformed_entries_are_collected_and_passed():
    cp = Checkpoint()
    bad = Malformed(sid="2-0", reason="not valid JSON", fields={b"e": b"{"})
    result = step(cp, [("1-0", metric(1, loss=1.0)), ("2-0", bad), ("3-0", metric(3, loss=math.nan))])
    assert result.dead == [bad]
    assert cp.after == "3-0"
    assert any(e.type == t.STOP_REQUESTED for e in result.outputs)

import math

from events import types as t
from events.envelope import make_event
from policies.default import default_policy
from policies.engine import PolicyState, evaluate
from policies.rules import NonFinite

POLICY = default_policy()


def metric(seq, **data):
    return make_event(t.METRIC, run="r", host="h", producer="p", seq=seq, data=data, ts=float(seq))


def run(events, state=None):
    state = state or PolicyState()
    out = []
    for e in events:
        out += [(o.type, o.data) for o in evaluate(POLICY, state, e)]
    return state, out


def test_first_healthy_metric_records_continue():
    state, out = run([metric(1, step=1, loss=2.0), metric(2, step=2, loss=1.9)])
    assert [(typ, d["decision"]) for typ, d in out] == [(t.DECISION, t.CONTINUE)]
    assert state.decision == t.CONTINUE


def test_nan_loss_opens_anomaly_and_stops_at_once():
    _, out = run([metric(1, step=1, loss=2.0), metric(2, step=2, loss=math.nan)])
    types = [typ for typ, _ in out]
    assert types == [t.DECISION, t.ANOMALY_OPENED, t.DECISION]
    anomaly, stop = out[1][1], out[2][1]
    assert anomaly["rule"] == "loss-nonfinite"
    assert anomaly["reason"] == "loss=nan at step 2"
    assert anomaly["trigger"] == "p:2"
    assert stop["decision"] == t.STOP
    assert stop["policy"] == POLICY.hash


def test_inf_and_aliases_fire_too():
    _, out = run([metric(1, **{"train/loss": math.inf})])
    assert out[-1][1]["decision"] == t.STOP
    assert out[-1][1]["reason"] == "train/loss=inf"


def test_stop_is_final_and_anomaly_opened_once():
    _, out = run([metric(i, step=i, loss=math.nan) for i in range(1, 6)])
    assert [typ for typ, _ in out] == [t.ANOMALY_OPENED, t.DECISION]


def test_anomaly_resolves_when_loss_is_finite_again():
    _, out = run([metric(1, loss=math.nan), metric(2, loss=1.0)])
    assert out[-1][0] == t.ANOMALY_RESOLVED
    assert out[-1][1]["opened_by"] == "p:1"


def test_metrics_without_loss_are_not_judged():
    _, out = run([metric(1, grad_norm=math.nan)])
    assert out == [(t.DECISION, out[0][1])]
    assert out[0][1]["decision"] == t.CONTINUE


def test_relaunch_resets_the_state():
    state, _ = run([metric(1, loss=math.nan)])
    launched = make_event(t.RUN_LAUNCHED, run="r", host="h", producer="p", seq=2)
    _, out = run([launched, metric(3, loss=math.nan)], state)
    assert [typ for typ, _ in out] == [t.ANOMALY_OPENED, t.DECISION]


def test_outputs_of_the_engine_are_not_inputs():
    stop = make_event(t.DECISION, run="r", host="h", producer="p", seq=1, data={"decision": "STOP"})
    assert run([stop])[1] == []


def test_anomaly_only_rule_opens_without_deciding():
    from policies.model import Policy

    policy = Policy(name="p", rules=(NonFinite(id="gn", metrics=("grad_norm",), decision=None),))
    state = PolicyState()
    out = evaluate(policy, state, metric(1, grad_norm=math.nan))
    assert [(o.type, o.data.get("decision")) for o in out] == [(t.ANOMALY_OPENED, None), (t.DECISION, t.CONTINUE)]


def test_policy_hash_changes_with_rules():
    from policies.model import Policy

    a = Policy(name="p", rules=(NonFinite(id="x"),))
    b = Policy(name="p", rules=(NonFinite(id="x", decision=None),))
    assert a.hash != b.hash
    assert a.hash == Policy(name="p", rules=(NonFinite(id="x"),)).hash

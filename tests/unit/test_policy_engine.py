"""Decision semantics: STOP > WAIT > CONTINUE, persistence, escalation, lifecycle, phases, cooldown."""

import math

from trainwarden.events import types as t
from trainwarden.policies.engine import PolicyState, apply_policy, evaluate

from tests.policy_helpers import Clock, policy, run, summary

NAN_STOP = """\
  - {id: loss-nonfinite, kind: nonfinite, metric: loss, decision: STOP, severity: critical, remedy: lower lr}
"""


def test_first_healthy_metric_records_continue_once():
    c = Clock()
    out = run(policy(NAN_STOP), [c.metric(1, step=1, loss=2.0), c.metric(2, step=2, loss=1.9)])
    assert summary(out) == ["CONTINUE"]
    assert out[0][1]["reason"] == "healthy"


def test_nan_opens_an_anomaly_and_stops_at_once_naming_value_step_and_trigger():
    c = Clock()
    pol = policy(NAN_STOP)
    out = run(pol, [c.metric(1, step=1, loss=2.0), nan := c.metric(2, step=2, loss=math.nan)])
    assert summary(out) == ["CONTINUE", "opened:loss-nonfinite", "STOP:loss-nonfinite"]
    anomaly, stop = out[1][1], out[2][1]
    assert anomaly["reason"] == "loss=nan at step 2"
    assert anomaly["remedy"] == "lower lr"
    assert anomaly["trigger"] == stop["trigger"] == nan.id
    assert stop["policy"] == pol.hash
    assert stop["anomaly"] == nan.id


def test_aliases_match_and_stop_is_final():
    c = Clock()
    out = run(policy(NAN_STOP), [c.metric(i, **{"train/loss": math.inf}) for i in range(5)])
    assert summary(out) == ["opened:loss-nonfinite", "STOP:loss-nonfinite"]
    assert out[0][1]["reason"] == "train/loss=inf"


def test_anomaly_resolves_when_the_condition_clears():
    c = Clock()
    out = run(policy(NAN_STOP.replace("decision: STOP", "decision: none")),
              [c.metric(1, loss=math.nan), c.metric(2, loss=1.0)])  # fmt: skip
    assert summary(out) == ["opened:loss-nonfinite", "CONTINUE", "resolved:loss-nonfinite"]
    assert out[-1][1]["opened_by"] == out[0][1]["trigger"]


def test_events_without_the_metric_are_not_judged_and_outputs_are_not_inputs():
    c = Clock()
    pol = policy(NAN_STOP)
    assert summary(run(pol, [c.metric(1, grad_norm=math.nan)])) == ["CONTINUE"]
    assert run(pol, [c.event(t.DECISION, 2, decision="STOP")]) == []


def test_relaunch_resets_decision_and_anomalies():
    c = Clock()
    pol = policy(NAN_STOP)
    state = PolicyState()
    run(pol, [c.metric(1, loss=math.nan)], state)
    out = run(pol, [c.event(t.RUN_LAUNCHED, 2), c.metric(3, loss=math.nan)], state)
    assert summary(out) == ["opened:loss-nonfinite", "STOP:loss-nonfinite"]


SPIKE = """\
  - id: loss-spike
    kind: spike
    metric: loss
    window: 10
    min_samples: 5
    escalate: {decision: STOP, for: 3 samples}
"""


def test_a_spike_that_recovers_within_its_window_does_not_stop():
    c = Clock()
    events = [c.metric(i, loss=1.0) for i in range(10)] + [c.metric(10, loss=3.0), c.metric(11, loss=3.1),
                                                          c.metric(12, loss=1.0)]  # fmt: skip
    assert summary(run(policy(SPIKE), events)) == ["CONTINUE", "opened:loss-spike", "resolved:loss-spike"]


def test_a_spike_that_persists_escalates_to_stop():
    c = Clock()
    events = [c.metric(i, loss=1.0) for i in range(10)] + [c.metric(10 + i, loss=3.0) for i in range(4)]
    out = run(policy(SPIKE), events)
    assert summary(out) == ["CONTINUE", "opened:loss-spike", "STOP:loss-spike"]
    assert out[-1][1]["reason"] == "loss=3 is 3x its trailing mean 1, persisting 3 samples"
    assert out[-1][1]["trigger"] == events[12].id  # the third spiked sample


def test_persistence_in_samples_needs_consecutive_samples():
    c = Clock()
    pol = policy("  - {id: gn, kind: threshold, metric: grad_norm, above: 100, for: 3 samples, decision: WAIT}\n")
    flapping = [c.metric(i, grad_norm=150 if i % 2 else 1) for i in range(8)]
    assert summary(run(pol, flapping)) == ["CONTINUE"]
    steady = [c.metric(10 + i, grad_norm=150) for i in range(3)]
    out = run(pol, flapping + steady)
    assert summary(out) == ["CONTINUE", "opened:gn", "WAIT:gn"]
    assert out[1][1]["reason"] == "grad_norm=150 > 100 (3 samples in a row)"


def test_duration_persistence_fires_on_a_tick_once_the_duration_passed():
    c = Clock()
    pol = policy("  - {id: util, kind: threshold, event: gpu, metric: gpu_util, below: 40, for: 30m}\n")
    events = [c.event(t.GPU, 0, util=10), c.tick(29 * 60)]
    assert summary(run(pol, events)) == []
    out = run(pol, [*events, c.tick(31 * 60)])
    assert summary(out) == ["opened:util"]
    assert out[0][1]["reason"] == "util=10 < 40 for 31m"


def test_wait_returns_to_continue_when_its_rule_clears():
    c = Clock()
    pol = policy("  - {id: silent, kind: absence, duration: 15m, decision: WAIT}\n")
    out = run(pol, [c.metric(0, loss=1.0), c.tick(10 * 60), c.tick(16 * 60), c.metric(17 * 60, loss=1.0)])
    assert summary(out) == ["CONTINUE", "opened:silent", "WAIT:silent", "resolved:silent", "CONTINUE"]
    assert out[1][1]["reason"] == "no metric for 16m"
    assert out[-1][1]["reason"] == "healthy again: silent resolved"


def test_stop_beats_wait():
    c = Clock()
    pol = policy("  - {id: silent, kind: absence, duration: 15m, decision: WAIT}\n" + NAN_STOP)
    out = run(pol, [c.metric(0, loss=1.0), c.tick(16 * 60), c.metric(17 * 60, loss=math.nan)])
    assert summary(out) == ["CONTINUE", "opened:silent", "WAIT:silent", "resolved:silent", "opened:loss-nonfinite",
                            "STOP:loss-nonfinite"]  # fmt: skip


def test_phase_startup_rule_opens_only_in_the_first_minutes():
    c = Clock()
    rule = "  - {id: first-loss, kind: absence, metric: loss, duration: 10m, phase: startup}\n"
    # loss never arrives: at 11 minutes, still in the 30-minute startup phase, it fires
    out = run(policy(rule), [c.event(t.RUN_LAUNCHED, 0), c.tick(5 * 60), c.tick(11 * 60)])
    assert summary(out) == ["opened:first-loss"]
    # the same silence later in the run is not the startup rule's business
    c = Clock()
    later = [c.event(t.RUN_LAUNCHED, 0), c.metric(60, loss=2.0), c.metric(35 * 60, loss=2.0), c.tick(50 * 60)]
    assert summary(run(policy(rule), later)) == ["CONTINUE"]


def test_steady_phase_rule_waits_for_the_startup_phase_to_end():
    c = Clock()
    pol = policy("  - {id: gn, kind: threshold, metric: grad_norm, above: 100, phase: steady}\n", startup="10m")
    out = run(pol, [c.metric(0, grad_norm=500), c.metric(9 * 60, grad_norm=500), c.metric(11 * 60, grad_norm=500)])
    assert summary(out) == ["CONTINUE", "opened:gn"]
    assert out[1][1]["trigger"].endswith(":3")


def test_cooldown_holds_back_a_flapping_rule():
    c = Clock()
    pol = policy("  - {id: gn, kind: threshold, metric: grad_norm, above: 100, cooldown: 10m}\n")
    values = [(0, 500), (60, 1), (120, 500), (180, 1), (11 * 60, 500)]
    out = run(pol, [c.metric(at, grad_norm=v) for at, v in values])
    assert summary(out) == ["opened:gn", "CONTINUE", "resolved:gn", "opened:gn"]


def test_a_changed_policy_resolves_removed_rules_and_records_itself():
    c = Clock()
    old = policy("  - {id: gn, kind: threshold, metric: grad_norm, above: 100, decision: WAIT}\n")
    new = policy(NAN_STOP)
    state = PolicyState()
    run(old, [c.metric(0, grad_norm=500)], state)
    assert state.decision == t.WAIT
    switched = apply_policy(new, state)
    assert [o.type for o in switched] == [t.POLICY_APPLIED, t.ANOMALY_RESOLVED]
    assert switched[0].data == {"policy": new.hash, "name": "test", "previous": old.hash}
    out = [(o.type, o.data) for o in evaluate(new, state, c.metric(60, grad_norm=500))]
    assert summary(out) == ["CONTINUE"]


def test_rule_state_is_plain_json():
    import json

    c = Clock()
    state = PolicyState()
    run(policy(SPIKE + NAN_STOP), [c.metric(i, loss=1.0 + i) for i in range(30)], state)
    assert PolicyState.from_dict(json.loads(json.dumps(state.to_dict()))) == state

"""The stop breaker's pure parts (workers/breaker.py): which STOPs it may hold, its limit (max_stops or a share
of the running runs), the new-rule grace, the settings, and the NaN of a run whose STOP it holds (evaluated like
any input, so `replay --verify` re-evaluates it)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from trainwarden.core.errors import ConfigError
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.projection import RunState
from trainwarden.policies.loader import load_policy
from trainwarden.workers.breaker import counts, gated, healthy_before, limit, new_rule
from trainwarden.workers.checkpoint import Checkpoint
from trainwarden.workers.config import BreakerSettings
from trainwarden.workers.evaluate import evaluate_entries

from trainwarden.settings import parse_settings

POLICY = load_policy(
    """\
name: p
rules:
  - {id: loss-nonfinite, kind: nonfinite, metric: loss, decision: STOP}
  - {id: loss-too-high, kind: threshold, metric: loss, above: 0.001, decision: STOP}
""",
    source="p.yaml",
)
ON = BreakerSettings(max_stops=3, window_s=600.0)


@pytest.mark.parametrize(
    ("request_data", "settings", "held"),
    [
        ({"by": "policy", "rule": "loss-too-high"}, ON, True),
        ({"by": "policy", "rule": "loss-nonfinite"}, ON, False),  # a NaN is a fault of one run: never held
        ({"by": "slack", "user": "U1", "rule": "loss-too-high"}, ON, False),  # a person's stop (Release, /stop)
        ({"by": "cli", "user": "ana"}, ON, False),
        ({"by": "policy", "rule": "gone-since-reload"}, ON, True),  # a rule the policy no longer has: not a fault
        ({"by": "policy", "rule": "loss-too-high"}, BreakerSettings(max_stops=0), False),  # turned off
    ],
)
def test_which_stops_the_breaker_may_hold(request_data, settings, held):
    assert gated(request_data, POLICY, settings) is held


def metric(seq, **data):
    return make_event(t.METRIC, run="r", host="gpu1", producer="gpu1/log/r/g0", seq=seq, data=data, ts=float(seq))


def test_a_nan_on_a_run_whose_stop_is_held_is_stopped_at_once_and_nothing_else_asks_again():
    cp = Checkpoint()
    first = evaluate_entries(POLICY, cp, [("1-0", metric(1, step=1, loss=2.0))], run="r", host="w", now=1.0).outputs
    decision = next(e for e in first if e.type == t.DECISION and e.data["decision"] == t.STOP)
    request = next(e for e in first if e.type == t.STOP_REQUESTED)
    held = make_event(t.STOP_HELD, run="r", host="w", producer="act/r/2-0", seq=1, ts=2.0,
                      data={"request": request.id, "decision": decision.id, "rule": "loss-too-high", "reason": "x",
                            "stops": 3, "max_stops": 3, "window_s": 600.0, "run_host": "gpu1"})  # fmt: skip
    read_back = [(f"{i}-1", e) for i, e in enumerate(first, start=2)] + [("9-0", held)]
    evaluate_entries(POLICY, cp, read_back, run="r", host="w", now=2.0)
    assert cp.guard is not None and cp.guard["deadline"] is None  # held: no deadline stops it
    assert cp.run.status != "stopping"
    calm = evaluate_entries(POLICY, cp, [("10-0", metric(2, step=2, loss=1.5))], run="r", host="w", now=3.0)
    assert not [e for e in calm.outputs if e.type == t.STOP_REQUESTED]  # still held
    nan = evaluate_entries(POLICY, cp, [("11-0", metric(3, step=3, loss=math.nan))], run="r", host="w", now=4.0)
    (fault,) = [e for e in nan.outputs if e.type == t.STOP_REQUESTED]
    assert fault.data["rule"] == "loss-nonfinite" and fault.data["decision"] == decision.id
    again = evaluate_entries(POLICY, cp, [("12-0", metric(4, step=4, loss=math.nan))], run="r", host="w", now=5.0)
    assert not [e for e in again.outputs if e.type == t.STOP_REQUESTED]


def test_the_breaker_settings_take_durations_and_refuse_a_bad_one_at_its_line(tmp_path):
    path = Path(tmp_path / "s.yaml")
    got = parse_settings("workers:\n  breaker: {max_stops: 5, window_s: 15m}\n", path, {})
    assert got.breaker == BreakerSettings(max_stops=5, window_s=900.0)
    assert parse_settings("host: h\n", path, {}).breaker == BreakerSettings()
    with pytest.raises(ConfigError) as info:
        parse_settings("workers:\n  breaker:\n    max_stop: 5\n", path, {})
    assert f"{path}:3:" in str(info.value)


def test_a_persons_stop_of_a_held_run_settles_its_hold():
    cp = Checkpoint()
    first = evaluate_entries(POLICY, cp, [("1-0", metric(1, step=1, loss=2.0))], run="r", host="w", now=1.0).outputs
    decision = next(e for e in first if e.type == t.DECISION and e.data["decision"] == t.STOP)
    held = make_event(t.STOP_HELD, run="r", host="w", producer="act/r/2-0", seq=1, ts=2.0,
                      data={"request": "eval/r:3", "decision": decision.id, "rule": "loss-too-high", "reason": "x",
                            "stops": 3, "max_stops": 3, "window_s": 600.0, "run_host": "gpu1"})  # fmt: skip
    evaluate_entries(POLICY, cp, [("9-0", held)], run="r", host="w", now=2.0)
    assert cp.guard is not None
    cli = make_event(t.STOP_REQUESTED, run="r", host="laptop", producer="cli/ana", seq=1, ts=3.0,
                     data={"by": "cli", "user": "ana", "reason": "release", "decision": None})  # fmt: skip
    evaluate_entries(POLICY, cp, [("10-0", cli)], run="r", host="w", now=3.0)
    assert cp.guard is None
    assert [a["kind"] for a in cp.pending][-1] == "stop"


@pytest.mark.parametrize(
    ("settings", "running", "most"),
    [
        (BreakerSettings(max_stops=3, max_share=0.1), 50, 5),  # 10% of 50 is more than 3
        (BreakerSettings(max_stops=3, max_share=0.1), 10, 3),  # 10% of 10 is less: max_stops
        (BreakerSettings(max_stops=3, max_share=0.1), 49, 4),  # rounded down: at most that share
        (BreakerSettings(max_stops=3, max_share=0.1), 0, 3),
        (BreakerSettings(max_stops=3, max_share=0.0), 500, 3),  # the share turned off
        (BreakerSettings(max_stops=1, max_share=0.3), 10, 3),  # 0.3 * 10 is 3, not 2.999...
    ],
)
def test_the_limit_is_max_stops_or_the_share_of_the_running_runs_whichever_is_more(settings, running, most):
    assert limit(settings, running) == most


@pytest.mark.parametrize(
    ("first_loaded", "now", "grace_s", "new"),
    [
        (1000.0, 1060.0, 600.0, True),  # loaded a minute ago
        (1000.0, 1600.0, 600.0, False),  # the grace is over
        (1000.0, 1060.0, 0.0, False),  # grace turned off
        (0.0, 1060.0, 600.0, False),  # in the first policy the workers ever loaded: not new
        (None, 1060.0, 600.0, False),  # never noted (a policy built in code): nothing to tell
        (1000.0, 990.0, 600.0, True),  # another worker's clock a little ahead: just loaded
    ],
)
def test_a_rule_is_new_within_the_grace_after_its_first_load(first_loaded, now, grace_s, new):
    assert new_rule(first_loaded, now=now, grace_s=grace_s) is new


def test_a_run_is_healthy_before_a_stop_when_no_other_anomaly_is_open():
    state = RunState()
    assert healthy_before(state, "loss-too-high")
    state.open_anomalies["loss-too-high"] = {"rule": "loss-too-high"}  # the STOP's own anomaly
    assert healthy_before(state, "loss-too-high")
    state.open_anomalies["gn-high"] = {"rule": "gn-high"}
    assert not healthy_before(state, "loss-too-high")


def test_a_rule_edited_is_a_new_definition_and_one_moved_is_not():
    moved = load_policy(
        "name: q\nrules:\n"
        "  - {id: loss-too-high, kind: threshold, metric: loss, above: 0.001, decision: STOP}\n"
        "  - {id: loss-nonfinite, kind: nonfinite, metric: loss, decision: STOP}\n",
        source="q.yaml",
    )
    edited = load_policy(
        "name: p\nrules:\n  - {id: loss-too-high, kind: threshold, metric: loss, above: 1000, decision: STOP}\n",
        source="r.yaml",
    )
    ours = POLICY.rule("loss-too-high")
    assert ours is not None and ours.definition == moved.rules[0].definition
    assert ours.definition != edited.rules[0].definition


def test_the_share_and_the_grace_are_read_from_the_settings_and_a_bad_value_is_refused_at_its_line(tmp_path):
    path = Path(tmp_path / "s.yaml")
    got = parse_settings("workers:\n  breaker: {max_share: 0.25, new_rule_grace_s: 5m}\n", path, {})
    assert got.breaker == BreakerSettings(max_share=0.25, new_rule_grace_s=300.0)
    assert BreakerSettings() == BreakerSettings(max_stops=3, window_s=600.0, max_share=0.1, new_rule_grace_s=600.0)
    off = parse_settings("workers:\n  breaker: {max_share: 0, new_rule_grace_s: 0}\n", path, {})
    assert (off.breaker.max_share, off.breaker.new_rule_grace_s) == (0.0, 0.0)
    for line, problem in [("max_share: 1.5", "'max_share' must be at most 1"),
                          ("max_share: -0.1", "'max_share' must be at least 0"),
                          ("new_rule_grace_s: ten minutes", "'new_rule_grace_s'")]:  # fmt: skip
        with pytest.raises(ConfigError) as info:
            parse_settings(f"workers:\n  breaker:\n    {line}\n", path, {})
        assert f"{path}:3:" in str(info.value) and problem in str(info.value), str(info.value)


def test_the_share_counts_the_runs_running_and_those_stopped_within_the_window():
    state = RunState(status="running")
    assert counts(state, stopped_since=1000.0)
    state.status = "stopping"
    assert counts(state, stopped_since=1000.0)
    state.status, state.stops = "stopped", [{"type": t.STOP_DONE, "ts": 1500.0}]
    assert counts(state, stopped_since=1000.0)  # stopped in this burst: still one of the runs it began with
    assert not counts(state, stopped_since=2000.0)  # stopped before the window
    assert not counts(RunState(status="finished"), stopped_since=0.0)
    assert not counts(RunState(), stopped_since=0.0)  # unknown: a plan's log, a run never seen running

"""Shadow mode: a rule (or a whole policy) records what it would have decided and decides nothing; the bot
says "would have stopped" and keeps treating the run as running."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainwarden.bot import messages
from trainwarden.bot.stages import NotifyState, Pipeline
from trainwarden.events import catalogue
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.policies.engine import PolicyState
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.loader import load_policy

from tests.policy_helpers import Clock, policy, run, summary
from trainwarden.cli.policy import log_events

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
NAN_RULE = "  - {id: nan, kind: nonfinite, metric: loss, decision: STOP, severity: critical%s}\n"
SPIKE_RULE = ("  - {id: spike, kind: spike, metric: loss, ratio: 2, window: 5, min_samples: 3%s,\n"
              "     escalate: {decision: STOP, for: 3 samples}}\n")  # fmt: skip


def _nan_run() -> list:
    c = Clock()
    return [c.metric(i * 10, step=i, loss=v) for i, v in enumerate([2.0, 1.9, float("nan"), float("nan"), 1.8])]


def test_a_shadow_rule_records_its_stop_and_the_run_goes_on():
    out = run(policy(NAN_RULE % ", shadow: true"), _nan_run())
    assert summary(out) == ["CONTINUE", "opened:nan", "shadow:STOP:nan", "resolved:nan"]
    (shadow,) = [d for typ, d in out if typ == t.DECISION_SHADOW]
    assert shadow["reason"] == "loss=nan at step 2" and shadow["anomaly"] is not None
    opened = next(d for typ, d in out if typ == t.ANOMALY_OPENED)
    assert opened["shadow"] is True and opened["decision"] == t.STOP
    assert catalogue.problems(t.DECISION_SHADOW, shadow) == []


def test_the_same_rule_enforced_stops_the_run():
    """The test above can fail: without `shadow: true` the same events are a STOP."""
    assert summary(run(policy(NAN_RULE % ""), _nan_run())) == ["CONTINUE", "opened:nan", "STOP:nan", "resolved:nan"]


def test_a_policy_in_shadow_mode_shadows_every_rule_unless_one_says_otherwise():
    text = (
        "name: trial\nmode: shadow\nrules:\n"
        + NAN_RULE % ""
        + NAN_RULE.replace("id: nan", "id: nan2") % (", shadow: false")
    )
    out = summary(run(load_policy(text, source="p.yaml"), _nan_run()))
    assert "shadow:STOP:nan" in out and "STOP:nan2" in out and "STOP:nan" not in out


def test_an_escalation_in_shadow_mode_is_recorded_once():
    c = Clock()
    events = [c.metric(i * 10, step=i, loss=v) for i, v in enumerate([1.0, 1.0, 1.0, 1.0, 9.0, 9.5, 9.7, 9.9, 9.8])]
    out = run(policy(SPIKE_RULE % ", shadow: true"), events)
    assert [s for s in summary(out) if "STOP" in s] == ["shadow:STOP:spike"]
    assert not [d for typ, d in out if typ == t.DECISION and d["decision"] == t.STOP]
    enforced = run(policy(SPIKE_RULE % ""), events)
    assert [s for s in summary(enforced) if "STOP" in s] == ["STOP:spike"]


def test_turning_a_shadow_rule_on_is_a_policy_change_that_decides_from_then_on():
    state = PolicyState()
    c = Clock()
    events = _nan_run()[:3]
    shadowed, enforced = policy(NAN_RULE % ", shadow: true"), policy(NAN_RULE % "")
    assert shadowed.hash != enforced.hash
    run(shadowed, events, state)
    assert state.decision == t.CONTINUE
    out = run(enforced, [c.metric(40, step=3, loss=float("nan"))], state)
    assert "STOP:nan" in summary(out)


def test_shadow_on_a_real_nan_run_from_the_corpus(tmp_path):
    """nanoGPT fp16 run whose loss turns NaN at iter 3010 (tests/data/real, MANIFEST: STOP), its lines less the
    `2023-03-22 09:32:52 ` timestamp the user's shell added (nanoGPT prints `iter 3010: loss nan, ...`)."""
    lines = (REAL / "nanogpt_fp16_v100_loss_nan.log").read_text().splitlines()
    (tmp_path / "train.log").write_text("".join(line.split(" ", 2)[-1] + "\n" for line in lines))
    events = list(log_events(tmp_path / "train.log", interval=10))
    out = summary(run(policy(NAN_RULE % ", shadow: true"), events))
    assert "shadow:STOP:nan" in out and not [s for s in out if s.startswith("STOP")]


def test_mode_values_are_checked():
    with pytest.raises(PolicyError) as info:
        load_policy("name: p\nmode: dry-run\nrules:\n" + NAN_RULE % "", source="p.yaml")
    assert "'mode'" in str(info.value) and "shadow" in str(info.value)


# -- the bot --------------------------------------------------------------------------------------------


def _ev(seq: int, typ: str, **data):
    return make_event(typ, run="exp01", host="w", producer="eval/exp01", seq=seq, ts=100.0 + seq,
                      data={"run_host": "gpu1", **data})  # fmt: skip


def test_the_bot_says_would_have_stopped_and_the_run_is_not_ended():
    shadow = _ev(2, t.DECISION_SHADOW, decision="STOP", rule="nan", reason="loss=nan at step 2", trigger="x",
                 policy="h")  # fmt: skip
    text = messages.notification_text(shadow)
    assert text is not None and text.startswith("WOULD HAVE STOPPED exp01@gpu1: loss=nan at step 2 (nan, shadow mode")
    assert "nothing was stopped" in text
    events = [_ev(1, t.ANOMALY_OPENED, rule="nan", reason="loss=nan", severity="critical", shadow=True),
              shadow, _ev(3, t.ANOMALY_OPENED, rule="gpu", reason="idle", severity="warning")]  # fmt: skip
    pipeline, state = Pipeline(flap_threshold=5, flap_window_s=100.0), NotifyState()
    out = [pipeline.process(state, e) for e in events]
    assert [n.kind if n else why for n, why in out] == ["healthy", t.DECISION_SHADOW, t.ANOMALY_OPENED]
    assert not state.ended and state.open_rules == ["gpu"]


def test_a_snoozed_rule_says_nothing_of_what_it_would_have_done():
    events = [_ev(1, t.SNOOZE_SET, rule="nan", until=1e12),
              _ev(2, t.DECISION_SHADOW, decision="STOP", rule="nan", reason="r", trigger="x", policy="h")]  # fmt: skip
    pipeline, state = Pipeline(flap_threshold=5, flap_window_s=100.0), NotifyState()
    assert [pipeline.process(state, e)[1] for e in events] == ["healthy", "snoozed"]


def test_a_backtest_shows_what_a_shadow_rule_would_have_done_and_stops_nothing():
    from trainwarden.policies.backtest import backtest

    result = backtest(policy(NAN_RULE % ", shadow: true"), _nan_run())
    assert result.stop is None
    assert [(m.what, m.rule) for m in result.timeline] == [("CONTINUE", None), ("WOULD-STOP", "nan")]

"""Healthy runs that must never be stopped (issue 39 item 4), on what real loops printed
(tests/data/logs/captured/README.md says how each was produced) and on the shapes' own values."""

from __future__ import annotations

from pathlib import Path

from trainwarden.events import types as t
from trainwarden.policies.backtest import backtest
from trainwarden.policies.default import default_policy
from trainwarden.policies.engine import PolicyState, apply_policy

from tests.policy_helpers import Clock, policy, run, summary
from trainwarden.cli.policy import log_events

CAPTURED = Path(__file__).resolve().parent.parent / "data" / "logs" / "captured"
POLICY = default_policy()


def test_a_noisy_per_batch_loss_whose_dip_returns_to_its_band_is_no_runaway():
    # before: loss-runaway STOP at step 287, "1.594 (median of the last 3) is 3.504x its best 0.4548": a
    # three-batch dip to the band's bottom was taken as the level the run held
    events = list(log_events(CAPTURED / "plain_torch_noisy_batches.log", interval=10))
    assert len([e for e in events if e.type == t.METRIC and "loss" in e.data]) == 400
    result = backtest(default_policy(), events)
    assert result.stop is None, result.timeline
    assert not [m.rule for m in result.firings if m.rule == "loss-runaway"]


def test_a_noisy_loss_that_really_runs_away_is_still_stopped():
    # the same band, then the run leaves it for good (3x its level, plus 1): stopped once the wider median is
    # up too, within the window its noise needs (31 values at most), not never
    noisy = [float(line.split()[-1]) for line in (CAPTURED / "plain_torch_noisy_batches.log").read_text().splitlines()]
    values = noisy[:200] + [3.0 * v + 1.0 for v in noisy[200:260]]
    c, state = Clock(), PolicyState()
    apply_policy(POLICY, state)
    stop_at = None
    for i, v in enumerate(values):
        out = run(POLICY, [c.metric(i * 10.0, step=i, loss=v)], state)
        if any(typ == t.DECISION and d["decision"] == t.STOP and d["rule"] == "loss-runaway" for typ, d in out):
            stop_at = i
            break
    assert stop_at is not None and 200 < stop_at <= 200 + 31, stop_at


def test_a_clean_loss_keeps_the_three_value_median():
    # a loss with little batch noise (relative spread 0.02) is judged on the median of 3, as before `hold`
    rule = policy("  - {id: r, kind: runaway, metric: loss, smooth: 3, hold: 31, decision: STOP}\n")
    c = Clock()
    values = [1.0 + 0.02 * ((i * 7) % 5 - 2) for i in range(40)] + [2.5, 2.6, 2.7]
    out = run(rule, [c.metric(i * 10.0, step=i, loss=v) for i, v in enumerate(values)])
    assert summary(out)[-2:] == ["opened:r", "STOP:r"], summary(out)
    assert "median of the last 3" in out[-1][1]["reason"]

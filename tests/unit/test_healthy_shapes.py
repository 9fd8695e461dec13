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


def verdict(rows: list[dict]) -> tuple[str | None, list[str]]:
    """The default policy over one metric event per row: (the STOP's rule, the rules opened)."""
    c, state = Clock(), PolicyState()
    apply_policy(POLICY, state)
    out = run(POLICY, [c.metric(i * 60.0, **row) for i, row in enumerate(rows)], state)
    stops = [d["rule"] for typ, d in out if typ == t.DECISION and d["decision"] == t.STOP]
    return (stops[0] if stops else None), [d["rule"] for typ, d in out if typ == t.ANOMALY_OPENED]


# dynamic loss scaling finding its level: the scale held at 2048 (the start-up search is over), then halved at
# every logged step (every 35 updates) down to 8 at update 389, the loss beside it finite and falling
FINDING = [{"step": 35 * i + 39, "loss": 4.0 - 0.1 * i, "loss_scale": 2048.0} for i in range(3)] + [
    {"step": 35 * i + 39, "loss": 4.0 - 0.1 * i, "loss_scale": 2.0 ** (13 - i)} for i in range(3, 11)]  # fmt: skip


def test_a_loss_scale_halving_while_the_loss_falls_is_no_collapse():
    # before: loss-scale-collapse STOP, "loss_scale halved 2 times in a row to 8 (32 -> 16 -> 8)"
    assert FINDING[-1] == {"step": 389, "loss": 3.0, "loss_scale": 8.0}
    assert verdict(FINDING) == (None, [])


def test_a_loss_scale_halving_while_the_loss_stays_put_is_a_collapse():
    # every step overflows: the weights do not move, the loss makes no new low (it wobbles around 3.0)
    stuck = [{"step": r["step"] + 1000, "loss": 3.05 + 0.02 * (i % 2), "loss_scale": 2.0 ** (2 - i)}
             for i, r in enumerate(FINDING[:4])]  # fmt: skip
    assert verdict([*FINDING[:-2], *stuck])[0] == "loss-scale-collapse"
    assert verdict([{k: v for k, v in r.items() if k != "loss"} for r in FINDING])[0] == "loss-scale-collapse"


# fairseq fp16 (https://github.com/facebookresearch/fairseq/issues/515, turn 7): the scale halved again and again
# in the first few hundred updates, 0.0625 -> 0.004, three times in a row between two progress lines, while the
# loss fell 14.351 -> 12.165
FAIRSEQ_FINDING = (
    "| WARNING: overflow detected, setting loss scale to: 0.0625\n"
    "| epoch 001:    200 / 1374 loss=14.351, ppl=20899.56,"
    " wps=49604, ups=0, wpb=277035.016, bsz=8563.074, num_updates=190,"
    " lr=4.84525e-06, gnorm=3.901, clip=0.000, oom=0.000, loss_scale=0.062, wall=1061, train_wall=945\n"
    "| epoch 001:    300 / 1374 loss=13.689, ppl=13208.82,"
    " wps=51846, ups=0, wpb=277242.090, bsz=8636.772, num_updates=290,"
    " lr=7.34275e-06, gnorm=3.057, clip=0.000, oom=0.000, loss_scale=0.062, wall=1551, train_wall=1413\n"
    "| WARNING: overflow detected, setting loss scale to: 0.03125\n"
    "| epoch 001:    400 / 1374 loss=13.137, ppl=9007.95,"
    " wps=52932, ups=0, wpb=277361.147, bsz=8693.717, num_updates=389,"
    " lr=9.81528e-06, gnorm=2.587, clip=0.000, oom=0.000, loss_scale=0.031, wall=2038, train_wall=1880\n"
    "| WARNING: overflow detected, setting loss scale to: 0.015625\n"
    "| WARNING: overflow detected, setting loss scale to: 0.0078125\n"
    "| WARNING: overflow detected, setting loss scale to: 0.00390625\n"
    "| epoch 001:    500 / 1374 loss=12.636, ppl=6365.15,"
    " wps=53414, ups=0, wpb=277442.903, bsz=8660.477, num_updates=486,"
    " lr=1.22379e-05, gnorm=2.302, clip=0.000, oom=0.000, loss_scale=0.004, wall=2524, train_wall=2346\n"
    "| epoch 001:    600 / 1374 loss=12.165, ppl=4591.89,"
    " wps=54027, ups=0, wpb=277286.831, bsz=8643.700, num_updates=586,"
    " lr=1.47354e-05, gnorm=2.105, clip=0.000, oom=0.000, loss_scale=0.004\n"
)


def test_fairseq_loss_scale_finding_its_level_as_the_loss_falls_is_not_stopped(tmp_path):
    # before: STOP at update 389, "loss_scale halved 2 times in a row to 0.031 (0.062 -> 0.03125 -> 0.031)"
    log = tmp_path / "train.log"
    log.write_text(FAIRSEQ_FINDING)
    events = list(log_events(log, interval=10))
    scales = [e.data["loss_scale"] for e in events if e.type == t.METRIC and "loss_scale" in e.data]
    assert scales[-5:] == [0.015625, 0.0078125, 0.00390625, 0.004, 0.004]
    result = backtest(POLICY, events)
    assert result.stop is None, result.timeline
    assert not result.firings


def test_a_storm_after_a_new_low_is_decided_by_the_next_line_with_a_loss(tmp_path):
    # the same lines, but the progress line after the three halvings shows no new low: every step overflowed
    log = tmp_path / "train.log"
    log.write_text(FAIRSEQ_FINDING.replace("loss=12.636", "loss=13.402"))
    result = backtest(POLICY, list(log_events(log, interval=10)))
    assert result.stop is not None and result.stop.rule == "loss-scale-collapse"
    assert result.stop.step == 486


def test_a_real_gradscaler_run_finding_its_level_is_not_stopped():
    # before: loss-scale-collapse STOP at update 200 ("32 -> 16 -> 4") and at update 150 ("16 -> 8 -> 2")
    for name, scales in (("plain_torch_fp16_gradscaler_0.log", [32, 32, 16, 4]),
                         ("plain_torch_fp16_gradscaler_2.log", [16, 8, 2, 2])):  # fmt: skip
        events = list(log_events(CAPTURED / name, interval=10))
        rows = [e.data for e in events if e.type == t.METRIC]
        assert [r["loss_scale"] for r in rows[:4]] == scales
        assert rows[-1]["loss"] < rows[0]["loss"] / 100
        result = backtest(POLICY, events)
        assert result.stop is None, (name, result.timeline)


def test_a_slow_start_that_then_learns_is_not_stopped():
    # before: val-frozen STOP at the second eval ("val_loss has been 1.4299 at 2 evals in a row"): its learning rate
    # was still warming up from 1e-6; val-no-progress would have stopped it at step 200 next
    events = list(log_events(CAPTURED / "plain_torch_slow_start.log", interval=10))
    evals = [e.data for e in events if e.type == t.METRIC and "val_loss" in e.data]
    assert [e["val_loss"] for e in evals[:3]] == [1.4299] * 3 and evals[-1]["val_acc"] > 0.9
    result = backtest(POLICY, events)
    assert result.stop is None, result.timeline
    assert not [m for m in result.firings if m.rule in ("val-frozen", "val-no-progress")][1:]  # one warning at most


# plain_torch_slow_start.log's evals at steps 25-225 (every 25 steps) before it climbs to 0.69 at step 550
SLOW_EVALS = [1.4299, 1.4299, 1.4299, 1.4298, 1.4296, 1.4295, 1.4291, 1.4286, 1.4278]


def test_a_slow_start_climbing_is_not_stuck_but_a_flat_one_is():
    rule = policy("  - {id: np, kind: no_progress, metric: val_loss, evals: 6, min_delta: 0.005, descent: 3,"
                  " decision: STOP, for: 3 samples}\n")  # fmt: skip
    c = Clock()
    climbing = run(rule, [c.metric(i * 60.0, step=25 * (i + 1), val_loss=v) for i, v in enumerate(SLOW_EVALS)])
    assert "STOP:np" not in summary(climbing), summary(climbing)
    # hf_state_quality_stuck_chance.trainer_state.json's evals at steps 50-400, at ln 4: now and then lower, not on a
    # descent; stopped at the 8th eval as before
    flat = [1.386302, 1.386276, 1.386188, 1.385595, 1.386195, 1.386149, 1.386302, 1.386294]
    c = Clock()
    out = run(rule, [c.metric(i * 60.0, step=50 * (i + 1), val_loss=v) for i, v in enumerate(flat)])
    assert summary(out)[-1] == "STOP:np", summary(out)


def test_an_eval_loss_repeated_while_the_learning_rate_warms_up_is_no_frozen_network():
    rows = [{"step": 10, "loss": 1.41, "lr": 1e-6}, {"step": 25, "val_loss": 1.4299},
            {"step": 40, "loss": 1.44, "lr": 2e-6}, {"step": 50, "val_loss": 1.4299}]  # fmt: skip
    assert verdict(rows) == (None, [])
    # the same repeat once the learning rate stopped rising (constant, or past its peak): a dead network
    rows[2]["lr"] = 1e-6
    assert verdict(rows) == ("val-frozen", ["val-frozen"])


def deepspeed_hf(*steps: tuple[list[int], float]) -> str:
    """HF Trainer's loss dicts with DeepSpeed's overflow notes before them (the lines of
    deepspeed_hf_overflow_storm_to_min_scale.log, tests/data/real): (the scales it reduced to, the loss after)."""
    note = ("[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 "
            "Skipping step. Attempted loss scale: {}, reducing to {}\n")  # fmt: skip
    out = []
    for i, (scales, loss) in enumerate(steps):
        out += [note.format(scale * 2, scale) for scale in scales]
        out.append(f"{{'loss': {loss}, 'learning_rate': 0.0001961913563176343, 'epoch': {0.01 * (i + 1):.2f}}}\n")
    return "".join(out)


def test_deepspeed_halvings_between_falling_hf_losses_are_no_collapse(tmp_path):
    # before: loss-scale-collapse STOP at `reducing to 4` (16 -> 8 -> 4 on 3 notes in a row); the loss on the
    # Trainer's lines between them fell each time: steps went through
    log = tmp_path / "train.log"
    log.write_text(deepspeed_hf(([], 2.5), ([16], 2.4), ([8], 2.3), ([4], 2.2), ([], 2.1)))
    result = backtest(POLICY, list(log_events(log, interval=10)))
    assert result.stop is None, result.timeline
    # halved 3 times after the last new low, and the next loss line shows none (every step overflows): a collapse
    log.write_text(deepspeed_hf(([], 2.5), ([16], 2.4), ([8], 2.3), ([4, 2, 1], 2.35)))
    result = backtest(POLICY, list(log_events(log, interval=10)))
    assert result.stop is not None and result.stop.rule == "loss-scale-collapse", result.timeline

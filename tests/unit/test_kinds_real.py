"""The default policy's run-judging rules on values from real runs (tests/data/real, cited by file and line).

Each doomed run must be stopped by its `useful_stop` (MANIFEST.yaml), by the rule made for its class; each
healthy run must not be stopped, nor paged critically. Values are transcribed from the corpus files (or read
from them, for the `trainer_state.json` histories), not made up; the agent's parsing is not under test here.
"""

import json
import math
from pathlib import Path

import pytest
from trainwarden.events import types as t
from trainwarden.policies.default import default_policy
from trainwarden.policies.engine import PolicyState, apply_policy, evaluate

from tests.policy_helpers import Clock, policy, run

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
POLICY = default_policy()
NAN = math.nan


def judge(rows: list[dict]) -> tuple[int | None, str | None, list[str]]:
    """Run the default policy over one metric event per row: (index of the STOP, its rule, critical rules)."""
    c = Clock()
    stop_at, stop_rule, critical = None, None, []
    state = PolicyState()
    apply_policy(POLICY, state)
    for i, data in enumerate(rows):
        event = c.log(i * 60.0, data["line"]) if "line" in data else c.metric(i * 60.0, **data)
        for o in evaluate(POLICY, state, event):
            if o.type == t.ANOMALY_OPENED and o.data["severity"] == "critical":
                critical.append(o.data["rule"])
            if o.type == t.DECISION and o.data["decision"] == t.STOP and stop_at is None:
                stop_at, stop_rule = i, o.data["rule"]
    return stop_at, stop_rule, critical


def series(name: str, values: list[float]) -> list[dict]:
    return [{name: v} for v in values]


def trainer_state(file: str, key: str) -> list[float]:
    history = json.loads((REAL / file).read_text())["log_history"]
    return [float(h[key]) for h in history if key in h and "train_runtime" not in h]


# --- divergence against the run's best (runaway) ---------------------------------------------------------

# mlx_lm_lora_diverges_no_nan.log lines 4-12 (Iter 25 .. 200, train loss); useful_stop: Iter 100 (index 3),
# "by Iter 150 it is clear it does not come back" (index 5): 3 samples above 2x, as a loss spike must persist too
MLX_DIVERGES = [1.593, 1.406, 3.316, 6.437, 5.478, 4.857, 4.874, 4.604]
# waveglow_negative_loss_spike_no_recovery.log lines 1-32 (iterations 123873 .. 123904); useful_stop 123899 (index 26)
WAVEGLOW = [-5.480178833, -5.352289200, -5.298225403, -5.460500240, -5.547176361, -5.597653866, -5.451864243,
            -5.445433617, -5.494832516, -5.272130013, -5.312953949, -5.550226212, -5.573468208, -5.405485153,
            -4.718036175, -5.176541805, -4.795463085, -4.772330284, -4.845523357, 40490.179687500, -3.482588530,
            -2.216503620, -1.672664404, -1.454238176, -1.419931889, -1.281533122, -1.110476017, -1.149755478,
            -1.464488387, -1.522264838, -1.716608882, -1.713886499]  # fmt: skip
# keras_overfit_val_loss_explodes.log even lines 2-16 (epochs 1-8); useful_stop: epoch 3 (index 2)
KERAS_OVERFIT_VAL = [2.7296, 6.5856, 6.6323, 6.6323, 6.6284, 6.6299, 6.6323, 6.6323]


def test_a_loss_that_diverges_from_its_best_is_stopped_where_a_human_would():
    at, rule, _ = judge(series("loss", MLX_DIVERGES))
    assert (at, rule) == (5, "loss-runaway")


def test_a_negative_loss_that_never_returns_to_its_best_is_stopped():
    at, rule, _ = judge(series("loss", WAVEGLOW))
    assert rule == "loss-runaway" and at is not None and at <= 26


def test_an_exploding_val_loss_is_stopped():
    rows = [{"loss": 0.5, "val_loss": v} for v in KERAS_OVERFIT_VAL]  # keras fit lines carry both
    at, rule, _ = judge(rows)
    assert (at, rule) == (2, "val-runaway")


HEALTHY_LOSSES = {
    # tf_slim_objdet_slow_checkpointing.log: per-step detection loss, noisy 1.3-2.9 (the `loss = X` of each line)
    "tf_slim_noisy": [1.4688, 1.7181, 2.0240, 2.0866, 2.1031, 1.5433, 2.0120, 2.0841, 1.3150, 1.4747, 2.3231, 2.8910],
    # fairseq_legacy_lstm_epoch10_healthy.log lines 1-7, 11-13: instantaneous `loss=` of each progress line
    "fairseq_lstm": [1.27, 1.28, 0.91, 0.95, 1.56, 0.86, 1.33, 1.89, 1.37, 0.75],
    # sentence_transformers_hf_dict_multi_eval.log: two tasks' losses interleaved under one name
    "interleaved_tasks": [1.1021, 0.2063, 1.0987, 1.0937, 0.1481, 1.0968, 1.098, 0.1005, 1.0982, 1.0942],
    # keras_fit_generator_healthy.log: per-epoch training loss
    "keras_epochs": [1.8386, 1.8087, 1.3863, 1.1163, 1.0246, 1.0277, 0.9387, 0.9164, 0.9023, 0.9081],
}


@pytest.mark.parametrize("name", sorted(HEALTHY_LOSSES))
def test_noisy_or_interleaved_healthy_losses_are_not_runaways(name):
    assert judge(series("loss", HEALTHY_LOSSES[name])) == (None, None, [])


def test_a_loss_that_fell_a_thousandfold_may_jitter_at_its_floor():
    # hf_state_whisper_small_hi_evalloss_up_wer_down.trainer_state.json: 0.89 -> 0.0001, alternating series
    losses = trainer_state("hf_state_whisper_small_hi_evalloss_up_wer_down.trainer_state.json", "loss")
    assert len(losses) > 150
    assert judge(series("loss", losses)) == (None, None, [])


# --- mixed precision ---------------------------------------------------------------------------------------

# deepspeed_hf_overflow_storm_to_min_scale.log lines 2, 4, 10, 12, 14: `reducing to 32 / 16 / 8 / 4 / 2`,
# with the HF dict line 8 (loss 2.0491) between; useful_stop: the `reducing to 8` line (index 3 below)
STORM = [{"loss_scale": 32.0}, {"loss_scale": 16.0}, {"loss": 2.0491}, {"loss_scale": 8.0}, {"loss_scale": 4.0},
         {"loss_scale": 2.0}]  # fmt: skip


def test_an_overflow_storm_down_to_a_tiny_scale_is_stopped():
    at, rule, critical = judge(STORM)
    assert (at, rule) == (3, "loss-scale-collapse") and critical == ["loss-scale-collapse"]


STARTUP_SEARCHES = {
    # deepspeed_cogvideo_initial_scale_calibration.log lines 2-7: reducing to 2^31 .. 2^26
    "deepspeed_2_32": [2147483648.0, 1073741824.0, 536870912.0, 268435456.0, 134217728.0, 67108864.0],
    # deepspeed_hysteresis_startup_calibration.log lines 2-5 (line 2 keeps 65536: hysteresis)
    "hysteresis": [65536.0, 32768.0, 16384.0, 8192.0],
    # fairseq_v1_startup_overflow_loss_scale.log lines 12-13: `setting loss scale to: 64.0 / 32.0`
    "fairseq_128": [64.0, 32.0],
    # fairseq_v0_transformer_wmt_healthy.log: `loss_scale=2.000` on every progress line (a small, stable scale)
    "fairseq_stable_small": [2.0, 2.0, 2.0, 2.0, 2.0],
    # megatron_llm_pretrain_healthy.log: `loss scale: 1.0` on every iteration line (bf16: no dynamic scaling)
    "megatron_bf16": [1.0, 1.0, 1.0, 1.0],
}


@pytest.mark.parametrize("name", sorted(STARTUP_SEARCHES))
def test_the_start_up_loss_scale_search_and_stable_scales_are_normal(name):
    assert judge(series("loss_scale", STARTUP_SEARCHES[name])) == (None, None, [])


def test_overflowing_at_the_minimum_loss_scale_is_stopped_at_once():
    # deepspeed_t5_loss_scale_stuck_at_1.log line 1
    line = ("[2021-11-27 00:36:54,800] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. "
            "Attempted loss scale: 1, reducing to 1")  # fmt: skip
    at, rule, _ = judge([{"line": line}, {"loss_scale": 1.0}])
    assert (at, rule) == (0, "loss-scale-at-minimum")
    # deepspeed_hysteresis_startup_calibration.log line 3: an ordinary halving is not the minimum
    halving = ("[2023-04-28 06:51:30,648] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 "
               "Skipping step. Attempted loss scale: 65536, reducing to 32768")  # fmt: skip
    assert judge([{"line": halving}]) == (None, None, [])


@pytest.mark.parametrize(("file", "rows", "stop_by"), [
    # hf_dict_modernbert_gradnorm_nan_loss_zero.log lines 1-3; useful_stop: line 2
    ("modernbert", [{"loss": 0.2051, "grad_norm": NAN}, {"loss": 0.0, "grad_norm": NAN},
                    {"loss": 0.0, "grad_norm": NAN}], 1),
    # hf_dict_llava_loss_zero_gradnorm_nan_from_start.log lines 1-3; useful_stop: line 3
    ("llava", [{"loss": 0.0, "grad_norm": NAN}] * 3, 2),
    # trl_simpo_dict_loss_zero_rewards_nan.log line 1; useful_stop: line 1
    ("simpo", [{"loss": 0.0, "grad_norm": NAN, "lr": 2.5784903139612557e-08}], 0),
    # megatron_deepspeed_gradnorm_nan_no_lm_loss.log lines 1-3: grad norm nan, no `lm loss` printed; useful_stop: line 1
    ("megatron", [{"grad_norm": NAN, "lr": 2.999e-4, "loss_scale": 1.0}] * 3, 0),
])  # fmt: skip
def test_a_persistent_or_broken_nonfinite_grad_norm_is_stopped(file, rows, stop_by):
    at, rule, critical = judge(rows)
    assert rule == "grad-norm-nonfinite" and at is not None and at <= stop_by, file
    assert critical == ["grad-norm-nonfinite"]


def test_a_skipped_step_with_a_finite_loss_is_no_page():
    # mmengine_xtuner_gradnorm_nan_loss_finite.log lines 1-6: grad_norm nan at [240] and [250], loss falling
    rows = [{"loss": 2.7522, "grad_norm": 3.0608}, {"loss": 2.6150, "grad_norm": 2.7647},
            {"loss": 2.6687, "grad_norm": 2.7647}, {"loss": 2.7682, "grad_norm": 2.5099},
            {"loss": 2.5128, "grad_norm": NAN}, {"loss": 2.4566, "grad_norm": NAN}]  # fmt: skip
    assert judge(rows) == (None, None, [])
    # NaN on every averaged line beside a steady loss (one skipped step per logging interval): a warning, never
    # a STOP or a page; a loss that turns 0 beside it still stops the run at once
    steady = [*rows, *({"loss": 2.44 + 0.01 * (i % 3), "grad_norm": NAN} for i in range(30))]
    assert judge(steady) == (None, None, [])
    c = Clock()
    out = run(POLICY, [c.metric(i, **row) for i, row in enumerate(steady)])
    opened = [(d["rule"], d["severity"]) for typ, d in out if typ == t.ANOMALY_OPENED]
    assert opened == [("grad-norm-skipped", "warning")]
    at, rule, critical = judge([*steady, {"loss": 0.0, "grad_norm": NAN}])
    assert (at, rule, critical) == (len(steady), "grad-norm-nonfinite", ["grad-norm-nonfinite"])


def test_a_grad_norm_excursion_is_a_warning_at_most():
    # fairseq_v0_pointer_gnorm_jump.log lines 1-8: gnorm 0.79 -> 11.5 -> 13.5 while the loss falls
    loss = [10.093, 10.071, 10.053, 10.034, 10.027, 10.012, 9.997, 9.979]
    gnorm = [0.788, 0.788, 0.787, 0.788, 0.794, 0.795, 11.481, 13.519]
    c = Clock()
    out = run(POLICY, [c.metric(i, loss=lv, grad_norm=g) for i, (lv, g) in enumerate(zip(loss, gnorm, strict=True))])
    opened = [(d["rule"], d["severity"]) for typ, d in out if typ == t.ANOMALY_OPENED]
    assert opened == [("grad-norm-high", "warning")]
    assert not any(typ == t.DECISION and d["decision"] == t.STOP for typ, d in out)


# --- no progress ---------------------------------------------------------------------------------------------

# keras_cnn_val_stuck_near_chance.log even lines 2-18 (epochs 1-9); useful_stop: epoch 8 (index 7)
KERAS_CNN_VAL = [1.7989, 1.8605, 1.8203, 1.8033, 1.8198, 1.7961, 1.8092, 1.8005, 1.7871]


def test_a_run_stuck_at_its_first_eval_is_stopped():
    at, rule, _ = judge(series("val_loss", KERAS_CNN_VAL))
    assert (at, rule) == (7, "val-no-progress")
    evals = trainer_state("hf_state_quality_stuck_chance.trainer_state.json", "eval_loss")  # ln(4) for 60 evals
    at, rule, _ = judge(series("val_loss", evals))
    assert rule == "val-no-progress" and at is not None and at <= 9  # useful_stop: the 10th eval


def test_a_frozen_eval_loss_is_stopped_at_its_first_repeat():
    # keras_stuck_at_half.log: val_loss 7.9712 at every epoch; useful_stop: epoch 3, the first repeat
    at, rule, _ = judge(series("val_loss", [7.9712] * 8))
    assert (at, rule) == (1, "val-frozen")


HEALTHY_EVALS = {
    # hf_state_distilbert_lora_imdb_healthy.trainer_state.json (read from the file)
    "distilbert": trainer_state("hf_state_distilbert_lora_imdb_healthy.trainer_state.json", "eval_loss"),
    # keras_r_regression_acc_meaningless.log: val_loss per epoch, tiny and noisy
    "keras_regression": [0.0673, 0.0161, 0.0096, 0.0129, 0.0084, 0.0069, 0.0109, 0.0087],
    # mlx_lm_gemma_lora_healthy_eval_every5.log: `Val loss` lines
    "mlx_gemma": [3.770, 3.044, 2.526, 2.368, 2.094],
}


@pytest.mark.parametrize("name", sorted(HEALTHY_EVALS))
def test_healthy_evals_are_not_stuck(name):
    assert judge(series("val_loss", HEALTHY_EVALS[name])) == (None, None, [])


# --- the kinds' own edges --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "values", "fires"), [
    ("kind: runaway, ratio: 2, warmup: 3, smooth: 1", [1.0, 1.0, 2.1], True),
    ("kind: runaway, ratio: 2, warmup: 4, smooth: 1", [1.0, 1.0, 2.1], False),  # still warming up
    ("kind: runaway, ratio: 2, smooth: 1", [1.0, 0.9, 1.0, 1.7], False),
    ("kind: runaway, ratio: 2, smooth: 3", [1.0, 1.0, 1.0, 5.0], False),  # one batch does not move a median
    ("kind: runaway, ratio: 2, smooth: 1", [-4.0, -4.0, -1.9], True),  # a negative loss at half its magnitude
    ("kind: runaway, ratio: 2, smooth: 1", [-4.0, -4.0, -2.1], False),
    ("kind: no_progress, evals: 3, mode: max", [0.25, 0.25, 0.252], True),
    ("kind: no_progress, evals: 3, mode: max", [0.25, 0.20, 0.30], False),
    ("kind: no_progress, evals: 3, first: 2", [2.0, 1.0, 1.0], True),  # no better than the best of the first two
    ("kind: frozen, count: 3", [7.9712, 7.9712, 7.9712], True),
    ("kind: frozen, count: 3", [1.0001, 1.0001, 1.01, 1.0001], False),
    ("kind: frozen, count: 3", [1.94, 1.94, 1.94], False),  # fairseq's `valid loss 1.94`: rounding, not frozen
    ("kind: frozen, count: 3, digits: 3", [1.94, 1.94, 1.94], True),
    ("kind: scale_collapse", [1024.0, 512.0, 0.0], True),
    ("kind: scale_collapse, halvings: 2, below: 16", [32.0, 16.0, 16.0, 8.0], False),  # a step went through
    ("kind: nonfinite, skipped_by: loss, skips: 2", [NAN, NAN], True),  # no loss in the event: fires at once
    ("kind: spike, above: 100", [150.0], True),  # the ceiling needs no history
    ("kind: spike, above: 100", [99.0], False),
])  # fmt: skip
def test_kind(fields, values, fires):
    c = Clock()
    pol = policy(f"  - {{id: k, metric: m, {fields}}}\n")
    out = run(pol, [c.metric(i, m=v) for i, v in enumerate(values)])
    assert any(typ == t.ANOMALY_OPENED for typ, _ in out) is fires

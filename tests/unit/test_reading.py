"""Which numbers of a run's log are metrics, and where in the run each metric line is: real lines from
tests/data/real (each test names its file; provenance in tests/data/real/MANIFEST.yaml)."""

from pathlib import Path

import pytest
from trainwarden.agent.reading import MAX_SHAPES, MetricReader
from trainwarden.core.metrics import at_step, is_known
from trainwarden.events import types as t
from trainwarden.policies.backtest import backtest
from trainwarden.policies.default import default_policy
from trainwarden.workers.chart import x_axis

from trainwarden.cli.policy import log_events

REAL = Path(__file__).resolve().parent.parent / "data" / "real"


def read(name: str) -> list[tuple[str, dict]]:
    """Every line of a corpus file with what one reader made of it, in order."""
    reader = MetricReader()
    return [(line, reader.read(line)[0]) for line in (REAL / name).read_text(encoding="utf-8").splitlines()]


def metrics(name: str) -> list[dict]:
    return [m for _, m in read(name) if m]


def of(name: str, line_start: str) -> list[dict]:
    return [m for line, m in read(name) if line.lstrip().startswith(line_start)]


@pytest.mark.parametrize(
    ("name", "banner"),
    [
        ("hf_dict_koelectra_evals_summary_healthy.log", "📝 Epochs: 5"),
        ("hf_dict_koelectra_evals_summary_healthy.log", "📦 Batch size: 8"),
        ("mlx_lm_gemma_lora_healthy_eval_every5.log", "Starting training..., iters: 400"),
        ("mlx_lm_gemma_lora_healthy_eval_every5.log", "Trainable parameters: 0.048%"),
        ("fairseq_v1_startup_overflow_loss_scale.log", "2020-04-05 18:38:34 | INFO | fairseq_cli.train | num. model"),
        ("fairseq_v1_startup_overflow_loss_scale.log", "2020-04-05 18:38:41 | INFO | fairseq_cli.train | max tokens"),
        ("lightning_bars_epoch_end_early.log", "TPU available: None, using: 0 TPU cores"),
        ("torchtune_codellama_full_finetune_healthy.log", "DEBUG:torchtune.utils.logging:Setting manual seed"),
        ("keras_tf1_fit_oom_traceback.log", "2018-05-10 09:14:16.535628: W tensorflow/core/framework/op_kernel.cc"),
    ],
)
def test_banners_configs_and_source_lines_are_not_metrics(name, banner):
    found = [m for line, m in read(name) if line.lstrip().startswith(banner)]
    assert found == [{}]


def test_a_known_name_makes_a_metric_line_at_once():
    # the first line of the file is a metric line: it has a loss
    first = metrics("hf_dict_koelectra_evals_summary_healthy.log")[0]
    assert first == {"loss": 1.1039, "lr": 1.866666666666667e-05, "epoch": 0.33, "step": 1}


def test_unknown_names_count_when_their_set_recurs_with_new_values():
    # fairseq_v1_startup_overflow_loss_scale.log: `NOTE: overflow detected, setting loss scale to: 64.0`: an
    # overflow is reported, never configured, so each note is the loss scale (never a metric named `to`)
    notes = [m for line, m in read("fairseq_v1_startup_overflow_loss_scale.log") if "NOTE: overflow" in line]
    assert [{k: v for k, v in m.items() if k != "step"} for m in notes] == [
        {"loss_scale": 64.0, "overflow": 1},
        {"loss_scale": 32.0, "overflow": 1},
    ]
    # the scale alone is a setting (DeepSpeed's config prints `'loss_scale': 0`): a metric only by recurrence
    reader = MetricReader()
    assert reader.read("loss_scale: 0")[0] == {}
    assert reader.read("loss_scale: 0")[0] == {}  # an exact repeat is no recurrence
    assert reader.read("loss_scale: 65536")[0]["loss_scale"] == 65536
    # megatron_deepspeed_gradnorm_nan_no_lm_loss.log: iteration lines without `lm loss` hold a grad norm, a
    # known measurement: each is a metric line, and none has a loss
    lines = read("megatron_deepspeed_gradnorm_nan_no_lm_loss.log")
    assert [bool(m) for _, m in lines] == [True, True, True]
    assert all("loss" not in m for _, m in lines)
    # nccl_llamafactory_allreduce_timeout.log: the same watchdog numbers printed twice (the same values) do
    # not make a metric shape
    assert metrics("nccl_llamafactory_allreduce_timeout.log") == []


def test_the_memory_of_shapes_is_bounded():
    reader = MetricReader()
    for i in range(MAX_SHAPES * 3):
        reader.read(f"x{i}: 1")
    assert len(reader._shapes) == MAX_SHAPES


@pytest.mark.parametrize(
    "name", ["hf_dict_koelectra_evals_summary_healthy.log", "hf_dict_trl_qlora_ipex_summary_healthy.log"]
)
def test_the_hugging_face_end_of_run_summary_is_not_a_step_loss(name):
    summary = of(name, "{'train_runtime'")
    assert summary, name
    for m in summary:
        assert "loss" not in m and "runtime" not in m
        assert m["summary/train_loss"] > 0 and "summary/train_runtime" in m
    # its position is the last training line's
    last_train = [m for m in metrics(name) if "loss" in m][-1]
    assert summary[0]["step"] == last_train["step"]


def test_hugging_face_dict_lines_are_positioned_and_evals_take_the_train_line_before():
    # hf_dict_koelectra_evals_summary_healthy.log: 3 train lines per epoch, an eval at each epoch's end
    got = metrics("hf_dict_koelectra_evals_summary_healthy.log")
    train = [m["step"] for m in got if "loss" in m]
    evals = [m["step"] for m in got if "val_loss" in m]
    assert train == list(range(1, 16))
    assert evals == [3, 6, 9, 12, 15]
    # sentence_transformers_hf_dict_multi_eval.log: evals before any training line are at 0
    st = metrics("sentence_transformers_hf_dict_multi_eval.log")
    assert [m["step"] for m in st[:3]] == [0, 0, 1]


@pytest.mark.parametrize(
    "name", ["keras_cnn_val_stuck_near_chance.log", "keras_stuck_at_half.log", "keras_r_regression_acc_meaningless.log"]
)
def test_keras_fit_lines_are_at_the_epoch_of_the_header_above(name):
    lines = read(name)
    headers = [int(line.split()[1].split("/")[0]) for line, _ in lines if line.strip().startswith("Epoch ")]
    fits = [m for _, m in lines if m]
    assert len(fits) == len(headers) > 3
    # keras_stuck_at_half.log prints the very same fit line every epoch: each is still at its own epoch
    assert [(m["epoch"], m["step"]) for m in fits] == [(e, e) for e in headers]
    assert all("loss" in m and "val_loss" in m for m in fits)


def test_a_bar_redrawn_unchanged_is_no_new_sample():
    reader = MetricReader()
    # lightning_bars_epoch_end_early.log: a Lightning bar redraw (at its epoch, and the batches so far)
    line = next(ln for ln, m in read("lightning_bars_epoch_end_early.log") if m)
    assert reader.read(line)[0] == {"epoch": 0, "loss": 4.73, "step": 3}
    assert reader.read(line)[0] == {}


HF_DICT_LOGS = sorted(p.name for p in REAL.glob("*.log") if p.name.startswith(("hf_dict_", "trl_", "sentence_")))


@pytest.mark.parametrize("name", HF_DICT_LOGS)
def test_every_metric_event_of_a_hugging_face_log_has_an_int_step_that_never_goes_back(name):
    steps = [e.data.get("step") for e in log_events(REAL / name, interval=10) if e.type == t.METRIC]
    assert steps, name
    assert all(type(s) is int for s in steps), steps
    assert steps == sorted(steps)


def test_a_backtest_of_a_hugging_face_log_says_where_in_steps():
    result = backtest(
        default_policy(), list(log_events(REAL / "hf_dict_llava_loss_zero_gradnorm_nan_from_start.log", interval=10))
    )
    assert (result.first_step, result.last_step) == (1, 13)
    assert [(f.step, f.rule) for f in result.firings] == [(1, "grad-norm-nonfinite")]
    assert result.stop is not None and "at step 1" in result.stop.reason


def test_known_names():
    assert all(map(is_known, ["loss", "val_loss", "grad_norm", "val_accuracy", "val_snli_loss", "total_loss", "acc"]))
    assert all(map(is_known, ["accuracy_top_1", "val_f1", "ppl"]))
    # settings, positions and counts: only by recurrence
    assert not any(map(is_known, ["lr", "step", "epoch", "epochs", "steps", "size", "val_steps", "val_batch_size"]))
    assert not any(map(is_known, ["val_check_interval", "loss_scale", "vocab_size", "pad_token_id", "max_steps"]))


def test_a_position_is_said_in_words_never_as_none():
    assert at_step(120) == "step 120"
    assert "None" not in at_step(None)


def test_chart_x_axis_is_a_position_never_the_clock():
    keras = [{**m, "ts": 1.7e9 + i} for i, m in enumerate(metrics("keras_stuck_at_half.log"))]
    assert x_axis(keras) == ("step", "epoch")  # Keras: the steps are epochs, and the axis says so
    hf = [{**m, "ts": 1.7e9 + i} for i, m in enumerate(metrics("hf_dict_koelectra_evals_summary_healthy.log"))]
    assert x_axis(hf) == ("step", "step")
    assert x_axis([{"epoch": 1.0, "loss": 2.0, "ts": 1.7e9}]) == ("epoch", "epoch")
    assert x_axis([{"loss": 2.0, "ts": 1.7e9}])[1] == "sample"

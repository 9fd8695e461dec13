"""Metric lines of every supported format (from the sample files), names, and notable lines."""

import math
from pathlib import Path

import pytest
from trainwarden.agent.formats import parse_metrics
from trainwarden.agent.logsource import RunLog
from trainwarden.agent.parse import notable
from trainwarden.agent.tail import LogTail
from trainwarden.core.metrics import canonical, normalise

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "logs"


def metrics_of(name: str) -> list[dict]:
    log = RunLog(run="r", host="h", tail=LogTail(SAMPLES / name))
    return [item.event.data for item in log.poll(0.0) + log.finish(0.0) if item.is_metric]


def same(a: dict, b: dict) -> bool:
    """Equal, with NaN equal to NaN."""
    return a.keys() == b.keys() and all(
        (isinstance(v, float) and math.isnan(v) and math.isnan(b[k])) or v == b[k] for k, v in a.items()
    )


NAN = math.nan
EXPECTED = {
    "key_value.log": [
        {"step": 1, "loss": 10.9875, "grad_norm": 3.21, "lr": 3e-4, "tokens_per_s": 12000.5},
        {"step": 2, "loss": 9.8761, "grad_norm": 2.98, "lr": 3e-4},
        {"step": 3, "loss": NAN, "grad_norm": math.inf, "lr": 3e-4},
    ],
    "key_colon.log": [
        {"epoch": 1, "step": 100, "loss": 2.3456, "lr": 0.0003, "grad_norm": 0.91},
        {"step": 200, "loss": 2.1234, "val_loss": 2.4567, "mfu": 35.5},
    ],
    # `Num Epochs = 1` in the Trainer's banner is not a metric (read once, no known name); the dict lines have
    # no step: a count of training lines, the eval line at the one before it; the end-of-run summary's
    # `train_loss` is the run's average, kept under `summary/` and at the last position
    "hf_trainer.log": [
        # `Num Epochs = 1` above: the run's plan, sent once with its first metric event (core/plan.py)
        {"loss": 2.3145, "grad_norm": 1.2034, "lr": 4.9e-05, "epoch": 0.1, "step": 1, "total_epochs": 1},
        {"loss": 2.1012, "grad_norm": 0.9876, "lr": 4.8e-05, "epoch": 0.2, "step": 2},
        {"val_loss": 2.0534, "val_runtime": 3.2104, "val_samples_per_second": 311.48,
         "val_steps_per_second": 38.94, "epoch": 0.2, "step": 2},
        {"loss": NAN, "grad_norm": NAN, "lr": 4.7e-05, "epoch": 0.3, "step": 3},
        {"summary/train_runtime": 100.2, "summary/train_samples_per_second": 39.92,
         "summary/train_steps_per_second": 4.99, "summary/train_loss": 2.05, "epoch": 1.0, "step": 3},
    ],
    "jsonl.log": [
        {"step": 100, "loss": 2.31, "lr": 0.0003, "tokens_per_s": 51234.0},
        {"step": 200, "loss": 2.12, "grad_norm": 0.8, "val_loss": 2.4},
        {"step": 300, "loss": NAN, "lr": 0.0003},
    ],
    "nanogpt.log": [
        {"step": 0, "loss": 10.9875, "val_loss": 10.988},
        {"step": 0, "loss": 10.9862, "time_ms": 1234.56, "mfu": -100.0},
        {"step": 10, "loss": 9.2345, "time_ms": 102.3, "mfu": 35.12},
        {"step": 250, "loss": 4.1234, "val_loss": 4.2345},
    ],
    "fairseq.log": [
        {"epoch": 1, "loss": 9.123, "nll_loss": 8.9, "ppl": 478.2, "wps": 12345.6, "ups": 2.1, "wpb": 5678.9,
         "bsz": 64, "step": 100, "lr": 1.25e-05, "grad_norm": 1.234, "wall": 45, "gb_free": 10.1},
        {"epoch": 1, "val_loss": 8.123, "val_nll_loss": 7.9, "val_ppl": 238.4, "val_wps": 45678, "val_wpb": 2345.6,
         "val_bsz": 32, "step": 1563},
    ],
    # each '\r' redraw is a line; a value carried unchanged from the last redraw is no new sample (agent.bars),
    # so a redraw that changes nothing is sent never; the bar being drawn waits; a bar with an epoch is at that
    # epoch and at the batches so far (epoch x total + position), one without at its position
    "lightning.log": [
        {"epoch": 0, "loss": 2.51, "step": 100},
        {"epoch": 0, "loss": 2.31, "step": 200},
        {"epoch": 0, "loss": 1.9, "val_loss": 2.05, "step": 1000},
    ],
    # the training bar's total is the run's planned steps, sent once (core/plan.py)
    "tqdm.log": [{"loss": 2.31, "lr": 0.0003, "step": 10, "total_steps": 100}, {"loss": NAN, "step": 20}],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_file(name):
    got = metrics_of(name)
    assert len(got) == len(EXPECTED[name]), got
    for g, e in zip(got, EXPECTED[name], strict=True):
        assert same(g, e), (g, e)


def test_every_sample_file_is_covered():
    assert {p.name for p in SAMPLES.glob("*.log")} - {"traceback.log"} == set(EXPECTED)


@pytest.mark.parametrize("text", ["nan", "NaN", "-nan"])
def test_nan_in_any_case(text):
    assert math.isnan(parse_metrics(f"step=3 loss={text}")["loss"])


@pytest.mark.parametrize(("text", "value"), [("inf", math.inf), ("-inf", -math.inf), ("Infinity", math.inf)])
def test_infinities(text, value):
    assert parse_metrics(f"loss={text}")["loss"] == value


@pytest.mark.parametrize(
    "line",
    ["", "loading dataset... done", "url=https://x/y?a=b", "name=resnet50", "2026-01-01 12:30:45 starting",
     "Num examples = 4,000", " 10%|█         | 50/500 [00:10<01:30,  4.98it/s]", "{'model': 'gpt2'}"],
)  # fmt: skip
def test_lines_without_metrics(line):
    assert parse_metrics(line) == {}


def test_int_and_float_kept_apart():
    out = parse_metrics("epoch=2 step=100 loss=1.0 lr=1e-3")
    assert type(out["step"]) is int
    assert type(out["loss"]) is float
    assert type(out["lr"]) is float


@pytest.mark.parametrize(
    ("printed", "canonical_name"),
    [("train/loss", "loss"), ("train_loss", "loss"), ("loss", "loss"), ("eval_loss", "val_loss"),
     ("eval/loss", "val_loss"), ("val/ppl", "val_ppl"), ("validation_loss", "val_loss"), ("valid_loss", "val_loss"),
     ("eval/perplexity", "val_ppl"), ("train/learning_rate", "lr"), ("learning_rate", "lr"), ("gnorm", "grad_norm"),
     ("train/global_step", "step"), ("num_updates", "step"), ("iter", "step"), ("tokens_per_second", "tokens_per_s"),
     ("tok/s", "tokens_per_s"), ("Val.PPL", "val_ppl"), ("mfu", "mfu"), ("value", "value")],
)  # fmt: skip
def test_canonical_names(printed, canonical_name):
    assert canonical(printed) == canonical_name


def test_a_name_taken_twice_keeps_the_second_under_its_printed_name():
    assert normalise({"loss": 1.0, "train/loss": 2.0}) == {"loss": 1.0, "train/loss": 2.0}


@pytest.mark.parametrize(
    ("line", "tag"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
        ("Traceback (most recent call last):", "traceback"),
        ("FileNotFoundError: [Errno 2] No such file or directory: 'data/train.bin'", "file_not_found"),
        ("Killed", "killed"),
        ("RuntimeError: NCCL error in: ../torch/csrc/distributed, unhandled system error", "nccl"),
        ("ValueError: bad shape", "error"),
        ("[rank3]: torch.OutOfMemoryError: CUDA out of memory.", "oom"),
        # tests/data/real/deepspeed_t5_loss_scale_stuck_at_1.log line 1: overflowing at the minimum scale
        (
            "[2021-11-27 00:36:54,800] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. "
            "Attempted loss scale: 1, reducing to 1",
            "loss_scale",
        ),
    ],
)
def test_notable_lines_are_tagged(line, tag):
    found = notable(line)
    assert found is not None
    assert found.tag == tag


def test_an_ordinary_loss_scale_halving_is_not_notable():
    # tests/data/real/deepspeed_hysteresis_startup_calibration.log line 3 (the start-up search)
    assert (
        notable(
            "[2023-04-28 06:51:30,648] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 "
            "Skipping step. Attempted loss scale: 65536, reducing to 32768"
        )
        is None
    )
    # tests/data/real/megatron_llm_pretrain_healthy.log line 1: `loss scale: 1.0` on every iteration (bf16)
    line = (Path(__file__).resolve().parents[1] / "data/real/megatron_llm_pretrain_healthy.log").read_text()
    assert "loss scale: 1.0" in line.splitlines()[0]
    assert notable(line.splitlines()[0]) is None


@pytest.mark.parametrize("line", ["step=1 loss=2.0", "errors=0 warnings=2", "Killed 3 stale workers"])
def test_ordinary_lines_are_not_notable(line):
    assert notable(line) is None

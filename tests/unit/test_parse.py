import math

import pytest

from agent.parse import notable, parse_metrics


def test_key_value_metrics():
    assert parse_metrics("step=120 loss=2.31 grad_norm=0.5 lr=3e-4 train/loss=2.3") == {
        "step": 120,
        "loss": 2.31,
        "grad_norm": 0.5,
        "lr": 3e-4,
        "train/loss": 2.3,
    }


@pytest.mark.parametrize("text", ["nan", "NaN", "-nan"])
def test_nan_in_any_case(text):
    assert math.isnan(parse_metrics(f"step=3 loss={text}")["loss"])


@pytest.mark.parametrize(("text", "value"), [("inf", math.inf), ("-inf", -math.inf), ("Infinity", math.inf)])
def test_infinities(text, value):
    assert parse_metrics(f"loss={text}")["loss"] == value


@pytest.mark.parametrize("line", ["", "loading dataset... done", "url=https://x/y?a=b", "name=resnet50"])
def test_lines_without_numeric_pairs(line):
    assert parse_metrics(line) == {}


def test_int_and_float_kept_apart():
    out = parse_metrics("epoch=2 step=100 loss=1.0 lr=1e-3")
    assert type(out["step"]) is int
    assert type(out["loss"]) is float
    assert type(out["lr"]) is float


@pytest.mark.parametrize(
    ("line", "tag"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
        ("Traceback (most recent call last):", "traceback"),
        ("FileNotFoundError: [Errno 2] No such file or directory: 'data/train.bin'", "file_not_found"),
        ("Killed", "killed"),
        ("RuntimeError: NCCL error in: ../torch/csrc/distributed, unhandled system error", "nccl"),
        ("ValueError: bad shape", "error"),
    ],
)
def test_notable_lines_are_tagged(line, tag):
    found = notable(line)
    assert found is not None
    assert found.tag == tag


def test_ordinary_lines_are_not_notable():
    assert notable("step=1 loss=2.0") is None

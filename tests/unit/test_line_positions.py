"""Where a line is in its run, what role its numbers have, and which lines hold no metric (issue 39, item 6):
a batch counted within its epoch is the position (not the epoch's number), an eval line's loss is the eval loss,
and a `datasets` map bar or faulthandler's module count is no metric. Real lines: captured from the libraries
(tests/data/logs/captured, README.md there) or quoted from the public issue named beside them."""

from __future__ import annotations

from pathlib import Path

from trainwarden.agent.formats import parse_metrics
from trainwarden.agent.reading import MetricReader
from trainwarden.core.metrics import normalise
from trainwarden.events import types as t
from trainwarden.policies.backtest import backtest
from trainwarden.policies.default import default_policy

from trainwarden.cli.policy import log_events

CAPTURED = Path(__file__).resolve().parent.parent / "data" / "logs" / "captured"

# OpenNMT-py's old training line, quoted from OpenNMT/OpenNMT-py#709 (`acc 0.00, ppl nan`)
OPENNMT = [
    "Epoch  1, 12900/37527; acc:   4.48; ppl: 35173.75; xent:  10.47; 3599 src tok/s; 3678 tgt tok/s;   9861 s elapsed",
    "Epoch  1, 12950/37527; acc:   4.50; ppl: 42885.19; xent:  10.67; 3594 src tok/s; 3678 tgt tok/s;   9897 s elapsed",
    "Epoch  1, 13000/37527; acc:   4.40; ppl: 24048.64; xent:  10.09; 3623 src tok/s; 3701 tgt tok/s;   9935 s elapsed",
    "Epoch  1, 13050/37527; acc:   4.36; ppl: 26476.23; xent:  10.18; 3456 src tok/s; 3536 tgt tok/s;   9973 s elapsed",
    "Epoch  1, 13100/37527; acc:   5.25; ppl: 9686.04; xent:   9.18; 3575 src tok/s; 3652 tgt tok/s;  10011 s elapsed",
]


def _read(lines: list[str]) -> list[dict]:
    reader = MetricReader()
    return [m for line in lines if (m := reader.read(line)[0])]


def _log(name: str) -> list[str]:
    return (CAPTURED / name).read_text(encoding="utf-8").replace("\r", "\n").splitlines()


# -- the PyTorch ImageNet example (pytorch/examples imagenet/main.py) ---------------------------------------


def test_the_imagenet_examples_training_lines_are_placed_by_epoch_and_batch():
    got = [m for m in _read(_log("pytorch_imagenet_example.log")) if "loss" in m]
    assert [m["step"] for m in got] == [e * 30 + b for e in range(3) for b in (1, 11, 21)]
    assert [m["epoch"] for m in got] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert got[7]["loss"] == 1.3194 and got[7]["acc1"] == 78.12 and got[7]["acc5"] == 100.0  # `[2][11/30]`


def test_the_imagenet_examples_test_lines_and_summary_are_the_eval():
    got = _read(_log("pytorch_imagenet_example.log"))
    evals = [m for m in got if "val_loss" in m or "val_acc1" in m]
    assert len(evals) == 12  # 3 `Test:` lines and the ` * Acc@1` summary, at each of 3 evals
    assert all("loss" not in m and "acc1" not in m for m in evals)  # the test loss is no training loss
    assert [m["step"] for m in evals] == [21] * 4 + [51] * 4 + [81] * 4  # after the epoch's last training line
    assert evals[2]["val_loss"] == 1.7394 and evals[2]["val_acc1"] == 48.12  # `Test: [5/5]`: the running mean
    assert evals[3] == {"val_acc1": 48.125, "val_acc5": 92.5, "step": 21}  # ` *   Acc@1 48.125 Acc@5 92.500`


def test_public_imagenet_example_lines():
    # yjh0410/pytorch-imagenet#1: a ViT run with the example's meters and an `lr` meter of its own
    train = (
        "Epoch: [0][  400/80073]\tTime  0.315 ( 0.372)\tData  0.002 ( 0.073)\tLoss 6.9802e+00 (7.0827e+00)\t"
        "Acc@1   0.00 (  0.08)\tAcc@5   6.25 (  0.55)\tlr 0.000000 (0.000002)"
    )
    assert normalise(parse_metrics(train)) == {
        "epoch": 0,
        "step": 400,
        "time": 0.315,
        "data": 0.002,
        "loss": 6.9802,
        "acc1": 0.0,
        "acc5": 6.25,
        "lr": 0.0,
    }
    # Cadene/pretrained-models.pytorch#149: the 2018 example's evaluation, as pasted (blanks for its tabs)
    test = (
        "Test: [1460/2500]       Time 0.036 (0.039)      Loss 2.6388 (0.9189)    Acc@1 45.000 (76.451)   "
        "Acc@5 55.000 (93.474)"
    )
    assert normalise(parse_metrics(test)) == {"val_loss": 0.9189, "val_acc1": 76.451, "val_acc5": 93.474}
    # the summary as the example printed it before 2022 (`print(' * Acc@1 {top1.avg:.3f} Acc@5 {top5.avg:.3f}'`)
    assert normalise(parse_metrics(" * Acc@1 76.130 Acc@5 92.862")) == {"val_acc1": 76.13, "val_acc5": 92.862}
    assert parse_metrics(" * loss 0.5 and more") == {"loss": 0.5}  # a bullet of other names is no eval summary


def test_swavs_meters_without_a_batch_total_behind_its_log_formatter():
    # the corpus's swav_loss_stuck_8_0066_ln3000_epoch163.log (facebookresearch/swav's LogFormatter and meters):
    # `Epoch: [163][50]` names no batch total, so the batch is the step (counted on across epochs)
    lines = [
        "INFO - 08/11/20 13:38:32 - 1 day, 22:12:28 - Epoch: [163][0]    Time 1.958 (1.958)      Data 1.576 (1.576)"
        "      Loss 8.0066 (8.0066)    Lr: 3.1982",
        "INFO - 08/11/20 13:39:16 - 1 day, 22:13:13 - Epoch: [163][50]   Time 0.890 (0.919)      Data 0.000 (0.031)"
        "      Loss 8.0065 (8.0066)    Lr: 3.1976",
    ]
    read = [normalise(parse_metrics(line)) for line in lines]
    assert [(m["epoch"], m["step"], m["loss"]) for m in read] == [(163, 0, 8.0066), (163, 50, 8.0065)]


# -- a batch within its epoch, an `it` counter -----------------------------------------------------------


def test_a_batch_counted_within_its_epoch_is_the_position():
    assert [m["step"] for m in _read(OPENNMT)] == [37527 + b for b in (12900, 12950, 13000, 13050, 13100)]
    # the issue's own lines
    assert _read(["train: epoch 1 batch 40/128 loss 2.3456"])[0]["step"] == 128 + 40
    assert _read(["it 150 | loss 2.345 | lr 0.001"])[0]["step"] == 150
    # DeiT's MetricLogger, quoted from THU-MIG/PYRA#3
    deit = "Epoch: [27]  [10/31]  eta: 0:00:07  lr: 0.001265  loss: 0.0276 (0.0314)  time: 0.3637  data: 0.2987"
    assert normalise(parse_metrics(deit))["step"] == 27 * 31 + 10
    # a line that counts its own steps keeps them: fairseq's `num_updates`, not the batch of the epoch before it
    fairseq = "epoch 001:   2800 / 160368 loss=9.255, ppl=611.12, num_updates=2800, lr=2.8e-05"
    assert normalise(parse_metrics(fairseq))["step"] == 2800


# -- no metric ----------------------------------------------------------------------------------------------


def test_a_datasets_map_bar_is_no_metric_and_uses_no_step():
    lines = _log("datasets_map_bars.log")
    assert any("Tokenizing train dataset:  27%" in line for line in lines)
    got = _read([*lines, "{'loss': 2.0491, 'learning_rate': 0.0001961913563176343, 'epoch': 0.28}"])
    assert got == [{"loss": 2.0491, "lr": 0.0001961913563176343, "epoch": 0.28, "step": 1}]


def test_faulthandlers_module_count_is_no_metric():
    assert _read(_log("faulthandler_segfault.log")) == []


# -- in a backtest --------------------------------------------------------------------------------------------


def test_backtest_opennmt_lines_are_five_points(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("\n".join(OPENNMT) + "\n", encoding="utf-8")
    metrics = [e.data for e in log_events(log, interval=10) if e.type == t.METRIC]
    assert len({m["step"] for m in metrics}) == 5


def test_backtest_the_imagenet_examples_test_loss_never_reaches_the_loss_rules():
    events = list(log_events(CAPTURED / "pytorch_imagenet_example.log", interval=10))
    losses = [e.data["loss"] for e in events if e.type == t.METRIC and "loss" in e.data]
    assert losses == [2.4402, 2.0596, 1.9994, 1.7328, 1.5826, 1.4946, 1.361, 1.3194, 1.2194]
    result = backtest(default_policy(), events)
    assert result.last_step == 81 and result.stop is None

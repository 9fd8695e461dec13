"""Which values of a metric line are samples (a setting printed beside them is not), and where the line is placed
when it prints more than one counter: samples are ordered by the finest counter, and none is placed before an
earlier one because a coarser counter repeats or restarts."""

from __future__ import annotations

from trainwarden.agent.reading import MetricReader


def _steps(lines: list[str]) -> list[dict]:
    reader = MetricReader()
    return [reader.read(line)[0] for line in lines]


def test_a_step_counted_within_each_epoch_counts_on_across_epochs():
    # the PyTorch tutorials' `Epoch [1/5], Step [100/600], Loss: 0.1234`
    got = _steps([f"Epoch [{e}/2], Step [{s}/200], Loss: 0.{e}{s}" for e in (1, 2) for s in (100, 200)])
    assert [m["step"] for m in got] == [100, 200, 300, 400]
    assert [m["epoch"] for m in got] == [1, 1, 2, 2]


def test_a_step_going_back_without_a_new_epoch_is_the_trainers_own():
    got = _steps(["step=5 loss=1.0", "step=3 loss=1.1"])  # a resumed run
    assert [m["step"] for m in got] == [5, 3]


def test_iterations_and_optimizer_steps_the_finer_is_the_position():
    got = _steps(["step 10 | iter 40 | loss 2.3", "step=11 iteration=44 loss=2.2"])
    assert [(m["step"], m["optimizer_step"]) for m in got] == [(40, 10), (44, 11)]


def test_an_epoch_and_a_batch_each_batch_is_a_sample():
    got = _steps([f"Epoch 3 batch {b} loss={2 - b / 100}" for b in (10, 20, 30)])
    assert [m["loss"] for m in got] == [1.9, 1.8, 1.7]  # none dropped because the epoch repeats


def test_a_setting_printed_beside_the_metrics_is_left_out_once_it_never_changes():
    got = _steps([f"step={s} loss={3 - s / 10} local_rank=0 vocab_size=32000 mfu={30 + s}" for s in range(1, 9)])
    assert all("loss" in m and "mfu" in m for m in got)  # a measurement, and a name whose value moves, always stay
    assert ["local_rank" in m for m in got] == [True] * 5 + [False] * 3
    assert ["vocab_size" in m for m in got] == [True] * 5 + [False] * 3


def test_a_loss_that_never_moves_is_still_read():
    got = _steps([f"step={s} loss=0.693 lr=0.001 val_acc=0.5" for s in range(1, 9)])
    assert all(m.keys() == {"step", "loss", "lr", "val_acc"} for m in got)


def test_a_setting_that_changes_is_read_again():
    got = _steps([f"step={s} loss=1.{s} bsz={64 if s < 8 else 32}" for s in range(1, 10)])
    assert [m.get("bsz") for m in got] == [64] * 5 + [None, None, 32, 32]

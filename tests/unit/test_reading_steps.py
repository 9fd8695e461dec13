"""Where a metric line is placed in the run when it prints more than one counter: samples are ordered by the
finest counter, and none is placed before an earlier one because a coarser counter repeats or restarts."""

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

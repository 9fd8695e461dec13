"""Console logs captured from the libraries themselves (tests/data/logs/captured, README.md there says which version
printed each and how), read the way the agent reads a log: every metric the run printed, nothing else, each once."""

from __future__ import annotations

import math
from pathlib import Path

from trainwarden.agent.bars import fresh
from trainwarden.agent.logsource import RunLog
from trainwarden.agent.tail import LogTail
from trainwarden.events import types as t
from trainwarden.policies.backtest import backtest
from trainwarden.policies.default import default_policy

from trainwarden.cli.policy import log_events

CAPTURED = Path(__file__).resolve().parent.parent / "data" / "logs" / "captured"


def metrics_of(name: str) -> list[dict]:
    log = RunLog(run="r", host="h", tail=LogTail(CAPTURED / name))
    return [dict(i.event.data) for i in log.poll(0.0) + log.finish(0.0, final=True) if i.is_metric]


def test_transformers_5_quoted_numbers_are_read_nan_included():
    got = metrics_of("hf_trainer5_tqdm_nan.log")
    train = [m for m in got if "loss" in m]
    evals = [m for m in got if "val_loss" in m]
    assert [m["loss"] for m in train] == [3.367, 4.363, 6.679, 2.693, 0, 0]
    assert math.isnan(train[-1]["grad_norm"])
    assert len(evals) == 3 and math.isnan(evals[-1]["val_loss"])
    assert [m["step"] for m in got] == sorted(m["step"] for m in got)
    assert any(k.startswith("summary/") for k in got[-1])


def test_transformers_5_printer_lines_are_read():
    got = metrics_of("hf_trainer5_printer_accum.log")
    assert [m["loss"] for m in got if "loss" in m][:2] == [3.902, 2.143e09]
    assert len([m for m in got if "val_loss" in m]) == 3


def test_a_lightning_model_summary_is_no_metric():
    for name in ("lightning2_tqdm_bar.log", "lightning2_rich_bar.log"):
        for m in metrics_of(name):
            assert not {"params", "val_mode", "mode", "flops"} & m.keys(), (name, m)


def test_lightning_rich_bar_is_read():
    got = metrics_of("lightning2_rich_bar.log")
    assert {"loss": 2.334, "epoch": 2}.items() <= got[0].items()
    assert any(m.get("val_loss") == 2.312 for m in got)


def test_a_lightning_nan_is_read_from_either_bar():
    tqdm = metrics_of("lightning2_tqdm_nan.log")
    first = next(m for m in tqdm if math.isnan(m.get("loss", 0.0)))
    assert first["step"] == 20 and "val_loss" not in first  # `train_loss=nan.0, val_loss=0.503`: carried
    rich = metrics_of("lightning2_rich_nan_max_steps.log")  # `Epoch 0/-2 ... 60/60 ... train_loss: nan`
    assert rich[0]["step"] == 60 and math.isnan(rich[0]["loss"]) and math.isnan(rich[1]["val_loss"])
    for name in ("lightning2_tqdm_nan.log", "lightning2_rich_nan_max_steps.log"):
        result = backtest(default_policy(), log_events(CAPTURED / name, interval=10))
        assert result.stop is not None and result.stop.rule == "loss-nonfinite", name


def test_a_lightning_tqdm_bar_yields_each_eval_once():
    got = metrics_of("lightning2_tqdm_bar.log")
    assert [m["val_loss"] for m in got if "val_loss" in m] == [4.14, 3.09, 2.31]  # three epochs, three evals
    assert len([m for m in got if "loss" in m]) == 24  # 8 batches x 3 epochs, each loss once
    steps = [m["step"] for m in got]
    assert steps == sorted(steps) and steps[-1] == 24


def test_a_healthy_lightning_run_is_not_stopped_by_its_carried_val_loss():
    # before: each redraw carrying val_loss=4.14 was an eval, and val-no-progress stopped the run in epoch 1
    events = list(log_events(CAPTURED / "lightning2_tqdm_bar.log", interval=10))
    result = backtest(default_policy(), events)
    assert result.stop is None, result.timeline
    assert len([e for e in events if e.type == t.METRIC and "val_loss" in e.data]) == 3


def test_an_eval_that_scores_the_same_is_still_an_eval():
    carried: dict = {}
    positions = frozenset({"step", "epoch"})
    assert fresh({"epoch": 0, "val_loss": 0.693}, carried, eval_ran=False, positions=positions) == {
        "epoch": 0, "val_loss": 0.693}  # fmt: skip
    assert fresh({"epoch": 1, "val_loss": 0.693}, carried, eval_ran=False, positions=positions) == {"epoch": 1}
    assert fresh({"epoch": 1, "val_loss": 0.693}, carried, eval_ran=True, positions=positions) == {
        "epoch": 1, "val_loss": 0.693}  # fmt: skip
    assert fresh({"loss": math.nan}, carried, eval_ran=False, positions=positions).keys() == {"loss"}
    assert fresh({"loss": math.nan}, carried, eval_ran=False, positions=positions) == {}  # NaN carried is NaN


def test_boosting_and_keras_logs_are_read_with_their_rounds_and_epochs():
    xgb = metrics_of("xgboost_train.log")
    assert [m["step"] for m in xgb] == [0, 1, 2, 3, 4] and xgb[0]["val_loss"] == 0.50276
    lgb = metrics_of("lightgbm_train.log")
    assert [m["step"] for m in lgb] == [1, 2, 3, 4, 5] and lgb[0]["val_loss"] == 0.614894
    keras = metrics_of("keras3_verbose2.log")
    assert [(m["epoch"], m["val_loss"]) for m in keras] == [(1, 1.0468), (2, 1.0333), (3, 1.0205)]


def test_lightning_rich_bar_on_a_terminal_is_read_through_its_colours():
    got = metrics_of("lightning2_rich_bar_tty.log")
    assert [m["val_loss"] for m in got if "val_loss" in m] == [5.892, 4.144, 3.092, 2.312]  # sanity check, 3 evals
    assert [m["loss"] for m in got if "loss" in m][-1] == 2.334
    steps = [m["step"] for m in got]
    assert steps == sorted(steps)

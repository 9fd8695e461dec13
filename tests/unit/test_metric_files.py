"""The structured metric readers (CSV loggers, trainer_state.json, TensorBoard events) on the real
files of the corpus (tests/data/real: provenance of each in MANIFEST.yaml), whole and growing."""

import json
import math
import shutil
from pathlib import Path

import pytest
from trainwarden.agent.csv_metrics import CsvFile, header_names, row_record
from trainwarden.agent.errors import MetricFileError
from trainwarden.agent.hf_state import TrainerState, history_records
from trainwarden.agent.metric_files import CSV, HF_STATE, LOG, TENSORBOARD, kind_of, metric_file_events
from trainwarden.agent.tfevents import EventFile, EventFiles, frames
from trainwarden.events import types as t

from trainwarden.cli.policy import log_events

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
LIGHTNING = REAL / "lightning_csvlogger_mnist_sparse_val_rows_healthy.metrics.csv"
YOLO = REAL / "ultralytics_fire_smoke_results.csv"
WHISPER = REAL / "hf_state_whisper_small_hi_evalloss_up_wer_down.trainer_state.json"
TB = REAL / "lightning_tb_sketch_retrieval_valloss_up_map_up.events.out.tfevents"


def test_the_reader_is_chosen_by_the_name(tmp_path):
    assert kind_of(LIGHTNING) == kind_of(YOLO) == CSV
    assert kind_of(WHISPER) == kind_of(Path("out/checkpoint-500/trainer_state.json")) == HF_STATE
    assert kind_of(TB) == kind_of(Path("runs/events.out.tfevents.1765986614.cea12525cbc9.70.0")) == TENSORBOARD
    assert kind_of(tmp_path) == TENSORBOARD  # a run directory
    assert kind_of(Path("train.log")) == kind_of(Path("metrics.jsonl")) == LOG


def test_lightning_sparse_rows_keep_their_own_columns_and_step():
    records = CsvFile(LIGHTNING).poll()
    # 0,49,,0.634955883026123,,   (a train row: the empty cells are no value)
    assert records[0].metrics == {"epoch": 0, "step": 49, "train_loss": 0.634955883026123}
    assert (records[0].step, records[0].seq) == (49, 1)
    # 0,1718,,,0.9761999845504761,0.07106363773345947   (the first validation row, row 35)
    val = next(r for r in records if "val_loss" in r.metrics)
    assert val.metrics == {
        "epoch": 0,
        "step": 1718,
        "val_accuracy": 0.9761999845504761,
        "val_loss": 0.07106363773345947,
    }
    assert (val.step, val.seq) == (1718, 35)
    assert len(records) == LIGHTNING.read_text().count("\n") - 1  # every row once
    assert [r.seq for r in records] == list(range(1, len(records) + 1))


def test_ultralytics_padded_names_and_the_epoch_as_position():
    header = YOLO.read_text().splitlines()[0]
    assert header_names(header)[:3] == ["epoch", "train/box_loss", "train/cls_loss"]
    records = CsvFile(YOLO).poll()
    assert len(records) == 25 and [r.step for r in records] == list(range(25))
    assert records[0].metrics["train/box_loss"] == 1.6878 and records[0].metrics["val/box_loss"] == 2.335


# timm's summary.csv (train.py -> timm/utils/summary.py `update_summary`: csv.DictWriter, so `\r\n` line
# ends; header `epoch`, `train_*`, `eval_*`, `lr`). Rows quoted in a public reproduction report of a timm
# resnet18 run (found with find_string "epoch,train_loss,eval_loss,eval_top1,eval_top5").
TIMM = [
    "epoch,train_loss,eval_loss,eval_top1,eval_top5,lr",
    "0,1.5266704335171952,0.633612437915802,78.36,99.28,0.05",
    "1,1.2209299079373352,0.5740737833976746,81.39,99.24,0.04522542485937369",
    "2,1.1507881676029956,0.5225296738147736,82.71,99.42,0.032725424859373686",
    "3,1.1035562335935414,0.48526961998939516,84.76,99.52,0.017274575140626316",
]


def test_timm_summary_rows_with_crlf_line_ends_cut_anywhere(tmp_path):
    data = "".join(line + "\r\n" for line in TIMM).encode()
    path = tmp_path / "summary.csv"
    reader = CsvFile(path)
    seen = []
    for cut in range(len(data) + 1):
        path.write_bytes(data[:cut])
        seen += reader.poll()
    assert [(r.seq, r.step) for r in seen] == [(1, 0), (2, 1), (3, 2), (4, 3)]
    assert seen[3].metrics == {"epoch": 3, "train_loss": 1.1035562335935414, "eval_loss": 0.48526961998939516,
                               "eval_top1": 84.76, "eval_top5": 99.52, "lr": 0.017274575140626316}  # fmt: skip
    names = header_names(TIMM[0])
    assert row_record(names, TIMM[1], sub="g0", seq=1, start=len(TIMM[0]) + 2) == seen[0]


def test_a_csv_that_grows_a_row_cut_mid_write_and_a_restart(tmp_path):
    data = LIGHTNING.read_bytes()
    growing = tmp_path / "metrics.csv"
    reader = CsvFile(growing)
    seen = []
    for cut in [*range(0, len(data), 97), len(data)]:
        growing.write_bytes(data[:cut])
        seen += reader.poll()
        if cut == 1500:  # the agent restarts with its saved position: nothing lost, nothing twice
            reader = CsvFile(growing, offset=reader.offset, generation=reader.generation, inode=reader.inode)
    assert [r.seq for r in seen] == [r.seq for r in CsvFile(LIGHTNING).poll()]
    assert seen == [r for r in CsvFile(growing).poll()]


def test_a_rewrite_with_a_wider_header_keeps_the_row_numbers(tmp_path):
    """Lightning rewrites metrics.csv with the new column when a metric name first appears."""
    lines = LIGHTNING.read_text().splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    narrow = "epoch,step,train_loss\n" + "".join(",".join([*r.split(",")[:2], r.split(",")[3]]) + "\n"
                                             for r in rows[:30])  # fmt: skip
    path = tmp_path / "metrics.csv"
    path.write_text(narrow)
    reader = CsvFile(path)
    first = reader.poll()
    assert [r.seq for r in first] == list(range(1, 31))
    path.write_text(header[: len(header) // 2])  # caught mid-rewrite: nothing, and no new generation
    assert reader.poll() == [] and reader.generation == 0
    path.write_text(header + "".join(rows[:10]))  # the wider header, not yet as far as the rows read
    assert reader.poll() == [] and reader.generation == 0
    path.write_text(header + "".join(rows[:40]))
    later = reader.poll()
    assert [r.seq for r in later] == list(range(31, 41)) and reader.generation == 0
    assert later[4].metrics == {"epoch": 0, "step": 1718, "val_accuracy": 0.9761999845504761,
                                "val_loss": 0.07106363773345947}  # fmt: skip
    path.unlink()
    path.write_text("epoch,step,train_loss\n0,1,2.5\n")  # a new run at the same path
    (again,) = reader.poll()
    assert (again.seq, again.sub, reader.generation) == (1, "g1", 1)


def test_trainer_state_entries_with_their_step_and_no_summary():
    records = history_records(json.loads(WHISPER.read_text()))
    # the run's plan (the state's max_steps, num_train_epochs: core/plan.py) goes with the first record of a read
    assert records[0].metrics == {"epoch": 0.06, "learning_rate": 4.6000000000000004e-07, "loss": 0.8917, "step": 25,
                                  "total_steps": 5000, "total_epochs": 13}  # fmt: skip
    assert "total_steps" not in records[1].metrics
    assert all(r.step is not None for r in records)
    assert not any("train_runtime" in r.metrics for r in records)  # the end-of-run average is no step loss
    assert records[-1].metrics["eval_wer"] == pytest.approx(32.096, abs=1e-3) and records[-1].step == 5000


def test_trainer_state_follows_the_newest_checkpoint(tmp_path):
    state = json.loads(WHISPER.read_text())
    out = tmp_path / "out"
    reader = TrainerState(out / "trainer_state.json")
    assert reader.poll() == [] and not reader.exists
    for first, n, step in ((1, 40, 1000), (41, 120, 3000)):
        ckpt = out / f"checkpoint-{step}"
        ckpt.mkdir(parents=True)
        (ckpt / "trainer_state.json").write_text(json.dumps({**state, "log_history": state["log_history"][:n]}))
        got = reader.poll()
        assert [r.seq for r in got] == list(range(first, n + 1))
    (out / "checkpoint-9999").mkdir()
    (out / "checkpoint-9999" / "trainer_state.json").write_text('{"log_history": [')  # caught mid-write
    assert reader.poll() == []
    shutil.copy(WHISPER, out / "trainer_state.json")  # the final state, with the end-of-run summary
    rest = reader.poll()
    assert rest[0].seq == 121 and rest[-1].step == 5000
    assert TrainerState(out / "trainer_state.json", offset=reader.offset).poll() == []  # restart: nothing twice


def test_tensorboard_scalars_of_a_real_lightning_file():
    records = EventFile(TB, rel=TB.name).poll()
    losses = [(r.step, r.metrics["train_loss"]) for r in records if "train_loss" in r.metrics]
    assert losses[0][0] == 49 and losses[0][1] == pytest.approx(19.5512, abs=1e-4)
    val = [(r.step, round(r.metrics["val_loss"], 2)) for r in records if "val_loss" in r.metrics]
    assert val == [(490, 35.76), (981, 37.44), (1472, 38.02), (1963, 38.57), (2454, 38.75), (2945, 39.06)]
    assert all(r.ts is not None and r.ts > 1.7e9 for r in records)
    assert [r.seq for r in records] == sorted(r.seq for r in records) and records[-1].seq == TB.stat().st_size


def test_a_tensorboard_file_that_grows_and_a_directory(tmp_path):
    data = TB.read_bytes()
    run = tmp_path / "run"
    (run / "version_0").mkdir(parents=True)
    growing = run / "version_0" / "events.out.tfevents.1768886380.5a8f612aea4b.122.0"
    reader = EventFiles(run)
    seen = []
    for cut in [*range(0, len(data), 333), len(data)]:
        growing.write_bytes(data[:cut])
        seen += reader.poll()
    whole = EventFile(TB, rel="x").poll()
    assert [(r.seq, r.metrics) for r in seen] == [(r.seq, {"version_0/" + k: v for k, v in r.metrics.items()})
                                                  for r in whole]  # fmt: skip
    assert {r.sub for r in seen} == {"version_0/events.out.tfevents.1768886380.5a8f612aea4b.122.0"}


def test_a_corrupt_tensorboard_record_is_named():
    data = bytearray(TB.read_bytes())
    data[100] ^= 0xFF
    with pytest.raises(MetricFileError, match="corrupt record"):
        frames(bytes(data), 0)


@pytest.mark.parametrize(("path", "count"), [(LIGHTNING, 178), (YOLO, 25), (WHISPER, 205), (TB, 76)])
def test_backtest_reads_them_as_metric_events(path, count):
    events = list(metric_file_events(path, run="backtest", interval=10.0))
    assert len(events) == count and all(e.type == t.METRIC and "step" in e.data for e in events)
    assert len({e.id for e in events}) == count
    if path == LIGHTNING:
        assert events[0].data == {"epoch": 0, "step": 49, "loss": 0.634955883026123}
        assert events[0].id == "backtest/csv/backtest/g0:1"
    if path == WHISPER:
        assert not math.isnan(events[-1].data["val_loss"])


def test_backtest_log_dispatches_by_the_same_rule(tmp_path):
    assert [e.id for e in log_events(YOLO, interval=10.0)] == [e.id for e in metric_file_events(YOLO, run="backtest")]
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=2.5\n")  # anything else is still a log, line by line
    (event,) = log_events(log, interval=10.0)
    assert event.producer == "backtest/log/backtest/g0"

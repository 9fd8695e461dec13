"""The agent following structured metric files as they grow (a Lightning CSVLogger file, a TensorBoard
event file): the real `trainwarden agent` process and the in-process agent, into a real Redis. The
files are the corpus's real ones (tests/data/real, provenance in MANIFEST.yaml), written out in pieces."""

import math
from pathlib import Path

import pytest
from trainwarden.agent.metric_files import metric_file_events
from trainwarden.agent.publisher import Publisher
from trainwarden.agent.runner import Agent
from trainwarden.agent.watch import RunWatch
from trainwarden.events import types as t

from tests.conftest import spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = pytest.mark.redis

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
LIGHTNING = REAL / "lightning_csvlogger_mnist_sparse_val_rows_healthy.metrics.csv"
TB = REAL / "lightning_tb_sketch_retrieval_valloss_up_map_up.events.out.tfevents"
# Keras 3 CSVLogger("training.log"), loss NaN from its third epoch (tests/data/logs/captured/README.md)
KERAS_CSV = REAL.parent / "logs" / "captured" / "keras3_csvlogger_nan.training.log"


def expected(path: Path) -> list[tuple[str, dict[str, float | int]]]:
    """Each record's event (id suffix and data) as the offline reader numbers it."""
    return [(e.id.rsplit(":", 1)[1], dict(e.data)) for e in metric_file_events(path, run="x", host="h")]


def published(store) -> list[tuple[str, dict[str, float | int]]]:
    return [(e.id.rsplit(":", 1)[1], dict(e.data)) for e in events_of(store, "exp01", t.METRIC)]


def test_the_agent_process_follows_a_growing_csv_with_a_row_cut_mid_write(settings_file, store, tmp_path):
    data = LIGHTNING.read_bytes()
    lines = data.splitlines(keepends=True)
    path = tmp_path / "lightning_logs" / "version_0" / "metrics.csv"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines[:20]) + lines[20][:9])  # 19 rows, and the 20th half written
    agent = spawn(settings_file, tmp_path / "agent.log", "agent", "--watch", f"exp01={path}")
    try:
        wait_for(lambda: len(published(store)) == 19, timeout=30, what="the 19 whole rows")
        with open(path, "ab") as f:
            f.write(lines[20][9:] + b"".join(lines[21:60]))
        wait_for(lambda: len(published(store)) == 59, timeout=30, what="the cut row and 39 more")
        with open(path, "ab") as f:
            f.write(b"".join(lines[60:]))
        want = expected(LIGHTNING)
        wait_for(lambda: len(published(store)) == len(want), timeout=30, what="every row")
    finally:
        stop_process(agent)
    got = published(store)
    assert got == want  # each row once, in order, with its step, numbered by its row
    assert got[19][1] == {"epoch": 0, "step": 999, "loss": 0.014237095601856709}  # the row that was cut
    assert {e.producer for e in events_of(store, "exp01", t.METRIC)} == {"testhost/csv/exp01/g0"}


def test_a_growing_tensorboard_file_and_a_restart_publish_each_record_once(store, tmp_path):
    data = TB.read_bytes()
    path = tmp_path / "events.out.tfevents.1768886380.5a8f612aea4b.122.0"
    state = tmp_path / "state.json"

    def agent() -> Agent:
        return Agent(publisher=Publisher(store), host="gpu1", watches=[RunWatch(run="exp01", log=path)],
                     state_path=state)  # fmt: skip

    for n, cut in enumerate(range(1000, len(data) + 1000, 1000)):
        path.write_bytes(data[: min(cut, len(data))])  # a record cut mid-write on most cuts
        if n == 3:
            state.unlink()  # a restart that lost its state reads from the start: the store drops the repeats
        agent().run(burst=True)
    assert published(store) == expected(TB)
    assert {e.producer for e in events_of(store, "exp01", t.METRIC)} == {f"gpu1/tb/exp01/{path.name}"}


def test_a_csvlogger_file_named_training_log_is_read_as_csv_once_its_header_is_written(store, tmp_path):
    lines = KERAS_CSV.read_bytes().splitlines(keepends=True)
    path = tmp_path / "training.log"
    path.write_bytes(b"")  # CSVLogger opens its file at on_train_begin and writes the header after epoch 1
    agent = Agent(publisher=Publisher(store), host="gpu1", watches=[RunWatch(run="exp01", log=path)],
                  state_path=tmp_path / "state.json")  # fmt: skip
    agent.run(burst=True)
    path.write_bytes(lines[0][:9])  # the header half written: still undecided
    agent.run(burst=True)
    with open(path, "ab") as f:
        f.write(lines[0][9:] + lines[1])
    agent.run(burst=True)
    assert [data for _, data in published(store)] == [{"step": 0, "epoch": 0, "loss": 9.708993911743164,
                                                        "mae": 2.586796283721924}]  # fmt: skip
    with open(path, "ab") as f:
        f.write(b"".join(lines[2:]))
    agent.run(burst=True)
    got = published(store)
    assert repr(got) == repr(expected(path)) and len(got) == 5  # each epoch's row once, numbered as offline (NaN too)
    assert math.isnan(got[2][1]["loss"]) and got[2][1]["step"] == 2
    assert {e.producer for e in events_of(store, "exp01", t.METRIC)} == {"gpu1/csv/exp01/g0"}

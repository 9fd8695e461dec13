"""The agent tailing real files into a real Redis."""

import math
from pathlib import Path

import pytest
from trainwarden.agent.publisher import Publisher
from trainwarden.agent.runner import Agent
from trainwarden.agent.watch import RunWatch
from trainwarden.events import types as t

from tests.helpers import events_of

pytestmark = pytest.mark.redis


def make_agent(store, log, state=None, **kwargs):
    return Agent(publisher=Publisher(store), host="gpu1", watches=[RunWatch(run="exp01", log=log)], state_path=state,
                 **kwargs)  # fmt: skip


def test_metrics_and_notable_lines_become_events(store, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("loading data\nstep=1 loss=2.5 lr=3e-4\nTraceback (most recent call last):\n"
                   '  File "train.py", line 3, in <module>\nValueError: bad batch\nstep=2 loss=nan\n')  # fmt: skip
    make_agent(store, log).run(burst=True)
    events = [e for e in events_of(store, "exp01") if e.type in (t.METRIC, t.LOG_LINE)]
    assert [e.type for e in events] == [t.METRIC, t.LOG_LINE, t.METRIC]
    assert events[0].data == {"step": 1, "loss": 2.5, "lr": 3e-4}
    assert events[1].data["tag"] == "traceback"
    assert events[1].data["line"].splitlines()[-1] == "ValueError: bad batch"
    assert math.isnan(events[2].data["loss"])
    assert all(e.host == "gpu1" for e in events)


def test_a_hugging_face_log_gets_positions_and_its_summary_is_no_loss(store, tmp_path):
    # a real Hugging Face Trainer run (tests/data/real, provenance in its MANIFEST): banner, dict lines, summary
    real = Path(__file__).resolve().parent.parent / "data" / "real" / "hf_dict_koelectra_evals_summary_healthy.log"
    log = tmp_path / "train.log"
    log.write_bytes(real.read_bytes())
    make_agent(store, log).run(burst=True)
    metrics = [e.data for e in events_of(store, "exp01", t.METRIC)]
    assert len(metrics) == 21  # 15 train lines, 5 evals, the summary; the banner's `Epochs: 5` is not one
    assert [m["step"] for m in metrics if "loss" in m] == list(range(1, 16))
    assert [m["step"] for m in metrics if "val_loss" in m] == [3, 6, 9, 12, 15]
    assert metrics[-1]["step"] == 15 and "loss" not in metrics[-1] and "summary/train_loss" in metrics[-1]


def test_a_log_only_run_says_its_data_source_and_sends_heartbeats(store, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=2.5\n")
    make_agent(store, log).run(burst=True)
    (status,) = events_of(store, "exp01", t.SOURCE_STATUS)
    # nothing says it uses W&B: the log is its source, not a fallback (expected value changed from log_fallback)
    assert status.data["status"] == "log"
    assert "does not use W&B" in status.data["reason"]
    (beat,) = events_of(store, "exp01", t.AGENT_HEARTBEAT)
    assert beat.data["sources"]["log"] == "ok"
    assert beat.data["sources"]["metrics"] == "log"
    assert beat.data["versions"]["trainwarden"]
    assert beat.data["gpu"]["status"] == "unavailable"


def test_restart_without_saved_offsets_adds_no_duplicates(store, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("".join(f"step={i} loss=1.0\n" for i in range(100)))
    make_agent(store, log).run(burst=True)
    make_agent(store, log).run(burst=True)  # lost its state: re-reads everything
    assert len(events_of(store, "exp01", t.METRIC)) == 100


def test_restart_with_saved_offsets_resumes_without_gaps(store, tmp_path):
    log, state = tmp_path / "train.log", tmp_path / "state.json"
    log.write_text("".join(f"step={i} loss=1.0\n" for i in range(10)))
    make_agent(store, log, state).run(burst=True)
    with open(log, "a") as f:
        f.write("".join(f"step={i} loss=1.0\n" for i in range(10, 20)))
    agent = make_agent(store, log, state)
    assert agent.watchers["exp01"].log.tail.offset > 0
    agent.run(burst=True)
    assert [e.data["step"] for e in events_of(store, "exp01", t.METRIC)] == list(range(20))


def test_truncated_log_keeps_producing_events(store, tmp_path):
    log, state = tmp_path / "train.log", tmp_path / "state.json"
    log.write_text("step=1 loss=3.0\nstep=2 loss=2.0\n")
    make_agent(store, log, state).run(burst=True)
    log.write_text("step=1 loss=9.0\n")  # a relaunch overwrote the log
    make_agent(store, log, state).run(burst=True)
    assert [e.data["loss"] for e in events_of(store, "exp01", t.METRIC)] == [3.0, 2.0, 9.0]


def test_renamed_log_is_read_to_its_end_then_the_new_one_from_the_start(store, tmp_path):
    log, state = tmp_path / "train.log", tmp_path / "state.json"
    log.write_text("step=1 loss=3.0\n")
    make_agent(store, log, state).run(burst=True)
    with open(log, "a") as f:
        f.write("step=2 loss=2.0\n")  # written just before the rotation, not read yet
    log.rename(tmp_path / "train.log.1")
    log.write_text("step=3 loss=1.0\n")
    make_agent(store, log, state).run(burst=True)
    assert [e.data["step"] for e in events_of(store, "exp01", t.METRIC)] == [1, 2, 3]


def test_secrets_in_log_lines_are_masked(store, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "0123456789abcdef0123456789abcdef01234567")
    log = tmp_path / "train.log"
    log.write_text("ValueError: login failed with key 0123456789abcdef0123456789abcdef01234567\n")
    make_agent(store, log).run(burst=True)
    (event,) = events_of(store, "exp01", t.LOG_LINE)
    assert "0123456789abcdef" not in event.data["line"]

"""The agent tailing real files into a real Redis."""

import math

import pytest

from agent.publisher import Publisher
from agent.runner import Agent, LogWatch
from events import types as t
from tests.helpers import events_of

pytestmark = pytest.mark.redis


def make_agent(store, log, state=None):
    return Agent(publisher=Publisher(store), host="gpu1", watches=[LogWatch("exp01", log)], state_path=state)


def test_metrics_and_notable_lines_become_events(store, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("loading data\nstep=1 loss=2.5 lr=3e-4\nTraceback (most recent call last):\nstep=2 loss=nan\n")
    make_agent(store, log).run(burst=True)
    events = events_of(store, "exp01")
    assert [e.type for e in events] == [t.METRIC, t.LOG_LINE, t.METRIC]
    assert events[0].data == {"step": 1, "loss": 2.5, "lr": 3e-4}
    assert events[1].data["tag"] == "traceback"
    assert math.isnan(events[2].data["loss"])
    assert all(e.host == "gpu1" for e in events)


def test_restart_without_saved_offsets_adds_no_duplicates(store, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("".join(f"step={i} loss=1.0\n" for i in range(100)))
    make_agent(store, log).run(burst=True)
    make_agent(store, log).run(burst=True)  # lost its state: re-reads everything
    assert store.length("exp01") == 100


def test_restart_with_saved_offsets_resumes_without_gaps(store, tmp_path):
    log, state = tmp_path / "train.log", tmp_path / "offsets.json"
    log.write_text("".join(f"step={i} loss=1.0\n" for i in range(10)))
    make_agent(store, log, state).run(burst=True)
    with open(log, "a") as f:
        f.write("".join(f"step={i} loss=1.0\n" for i in range(10, 20)))
    agent = make_agent(store, log, state)
    assert agent.tails["exp01"].offset > 0
    agent.run(burst=True)
    assert [e.data["step"] for e in events_of(store, "exp01")] == list(range(20))


def test_truncated_log_keeps_producing_events(store, tmp_path):
    log, state = tmp_path / "train.log", tmp_path / "offsets.json"
    log.write_text("step=1 loss=3.0\nstep=2 loss=2.0\n")
    make_agent(store, log, state).run(burst=True)
    log.write_text("step=1 loss=9.0\n")  # a relaunch overwrote the log
    make_agent(store, log, state).run(burst=True)
    assert [e.data["loss"] for e in events_of(store, "exp01")] == [3.0, 2.0, 9.0]


def test_secrets_in_log_lines_are_masked(store, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "0123456789abcdef0123456789abcdef01234567")
    log = tmp_path / "train.log"
    log.write_text("ValueError: login failed with key 0123456789abcdef0123456789abcdef01234567\n")
    make_agent(store, log).run(burst=True)
    (event,) = events_of(store, "exp01")
    assert "0123456789abcdef" not in event.data["line"]

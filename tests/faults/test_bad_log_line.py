"""One bad training log line (or one unreadable log) never stops the agent nor costs another line.

The real `trainwarden agent` process tails real files into a real redis-server.
"""

import math
import random
from pathlib import Path

import pytest
import yaml
from trainwarden.events import types as t

from tests.conftest import spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis]

POISON = '{"step": 30, "loss": ' + "[" * 100_000 + "\n"  # the trainer's line that crashed the JSON-line parser


def steps(store, run="exp01"):
    return [e.data["step"] for e in events_of(store, run, t.METRIC)]


def append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


@pytest.fixture
def agent_settings(settings_file: Path) -> Path:
    body = yaml.safe_load(settings_file.read_text())
    body["agent"]["heartbeat_interval_s"] = 0.2
    body["agent"]["process_interval_s"] = 0.2
    settings_file.write_text(yaml.safe_dump(body))
    return settings_file


def test_a_poison_line_costs_nothing_and_the_next_line_survives_a_restart(store, tmp_path, agent_settings):
    log = tmp_path / "train.log"
    log.write_text('{"step": 29, "loss": 2.0}\n')
    argv = ("agent", "--watch", f"exp01={log}")
    agent = spawn(agent_settings, tmp_path / "agent.log", *argv)
    try:
        wait_for(lambda: steps(store) == [29], timeout=20, what="step 29")
        append(log, POISON + '{"step": 31, "loss": 1.9}\n')
        wait_for(lambda: 31 in steps(store), timeout=10, what="step 31, the line after the poison one")
        assert agent.poll() is None, (tmp_path / "agent.log").read_text()[-2000:]
    finally:
        stop_process(agent)
    assert agent.returncode == 0, (tmp_path / "agent.log").read_text()[-2000:]

    # while it is down: another poison line and step 32; a restarted agent reads on from where it was
    append(log, POISON + '{"step": 32, "loss": 1.8}\n')
    agent = spawn(agent_settings, tmp_path / "agent2.log", *argv)
    try:
        wait_for(lambda: 32 in steps(store), timeout=20, what="step 32 after the restart")
        assert agent.poll() is None, (tmp_path / "agent2.log").read_text()[-2000:]
    finally:
        stop_process(agent)
    assert steps(store) == [29, 31, 32]  # none lost, none twice


def test_an_unreadable_log_is_that_runs_problem_only(store, tmp_path, agent_settings):
    good, bad = tmp_path / "train.log", tmp_path / "not-a-file.log"
    bad.mkdir()  # opening it fails on every poll (even as root, unlike a chmod)
    good.write_text("step=1 loss=2.0\n")
    agent = spawn(agent_settings, tmp_path / "agent.log", "agent", "--watch", f"exp01={good}",
                  "--watch", f"exp02={bad}")  # fmt: skip
    try:
        wait_for(lambda: steps(store) == [1], timeout=20, what="exp01's step 1")
        append(good, "step=2 loss=1.9\n")
        wait_for(lambda: steps(store) == [1, 2], timeout=10, what="exp01's step 2")

        def counted():
            beats = events_of(store, "exp01", t.AGENT_HEARTBEAT)
            return beats and beats[-1].data.get("source_errors", 0) >= 2 and beats[-1]

        beat = wait_for(counted, timeout=10, what="a heartbeat counting exp02's failures")
        assert agent.poll() is None
    finally:
        stop_process(agent)
    assert "exp02 log" in beat.data["last_source_error"]
    assert "IsADirectoryError" in beat.data["last_source_error"]
    said = (tmp_path / "agent.log").read_text()
    assert said.count("exp02 log failed") == 1, said[-3000:]  # logged once, not once per poll


def test_a_step_that_fails_saves_no_offset_past_its_lines(store, tmp_path, monkeypatch):
    """Should a step raise anyway, the agent leaves without saving offsets past lines whose events were never made."""
    from trainwarden.agent.publisher import Publisher
    from trainwarden.agent.runner import Agent
    from trainwarden.agent.watch import RunWatch

    log, state = tmp_path / "train.log", tmp_path / "state.json"
    log.write_text("step=1 loss=2.0\n")

    def agent() -> Agent:
        return Agent(publisher=Publisher(store), host="gpu1", watches=[RunWatch(run="exp01", log=log)],
                     state_path=state)  # fmt: skip

    agent().run(burst=True)
    append(log, "step=2 loss=1.9\n")
    failing = agent()
    monkeypatch.setattr(failing.publisher, "publish", lambda events: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        failing.run(burst=True)
    agent().run(burst=True)  # restarted
    assert steps(store) == [1, 2]


def test_five_megabytes_of_random_bytes_in_a_log_are_no_metrics(store, tmp_path, agent_settings):
    """Random bytes in a log (a binary cat'ed into it, a disk's garbage) once became about 145 one-letter "metrics"
    (`s=6`, `p=4`): a line the tailer had to decode with U+FFFD, or full of control bytes, holds no metric."""
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=2.0\nstep=2 loss=1.9\n")
    agent = spawn(agent_settings, tmp_path / "agent.log", "agent", "--watch", f"exp01={log}")
    try:
        wait_for(lambda: steps(store) == [1, 2], timeout=20, what="steps 1 and 2")
        with open(log, "ab") as f:  # the same 5 MB every run: a seeded generator, not os.urandom
            f.write(random.Random(38).randbytes(5 * 1024 * 1024) + b"\nstep=3 loss=1.8\nstep=4 loss=nan\n")
        wait_for(lambda: 4 in steps(store), timeout=120, what="step 4, after the random bytes")
        assert agent.poll() is None, (tmp_path / "agent.log").read_text()[-2000:]
    finally:
        stop_process(agent)
    metrics = events_of(store, "exp01", t.METRIC)
    assert [sorted(e.data) for e in metrics] == [["loss", "step"]] * 4, [e.data for e in metrics][:20]
    assert steps(store) == [1, 2, 3, 4] and math.isnan(metrics[-1].data["loss"])

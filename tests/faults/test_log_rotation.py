"""The log changes under the real agent as logrotate, a relaunch and a kill -9 change it (#38 items 4, 5, 9).

Each test runs the real agent process against a real Redis and counts the lines that never became events:

- logrotate's `create` under a writer that keeps its descriptor (a child process writing through a
  `logging.FileHandler`): the log is renamed with os.rename and a new empty one created while the writer goes
  on writing into the renamed file;
- a copytruncate (or a relaunch overwriting the log) while the agent is stopped: the log is truncated and
  grows back past the saved offset, a NaN before that offset;
- a kill -9 after the agent read a half-written line: the line is completed, the agent started again.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from trainwarden.events import types as t
from trainwarden.events.store import EventStore

from tests.conftest import spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

WRITER = """
import logging, sys, time
from pathlib import Path
log, flag, before, after = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
handler = logging.FileHandler(log)  # opened once, in append mode: it keeps writing into the file renamed away
out = logging.getLogger("train")
out.addHandler(handler)
out.setLevel(logging.INFO)
for step in range(1, after + 1):
    if step == before + 1:
        while not flag.exists():
            time.sleep(0.01)
    out.info("step=%d loss=%s", step, "nan" if step == after else f"{2.0 - step / 1000:.4f}")
    time.sleep(0.002)
"""


def metric_steps(store: EventStore, run: str) -> Counter[int]:
    return Counter(int(e.data["step"]) for e in events_of(store, run, t.METRIC) if "loss" in e.data)


def nan_published(store: EventStore, run: str) -> bool:
    return any(isinstance(v, float) and math.isnan(v) for e in events_of(store, run, t.METRIC) for v in e.data.values())


def test_rename_rotation_under_a_writer_that_keeps_its_descriptor_loses_no_line(store: EventStore,
                                                                               settings_file: Path,
                                                                               tmp_path: Path) -> None:  # fmt: skip
    log, flag, before, after = tmp_path / "train.log", tmp_path / "rotated", 100, 1000
    log.touch()
    agent = spawn(settings_file, tmp_path / "agent.log", "agent", "--watch", f"rot={log}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(flag), str(before), str(after)], env=env)
    try:
        wait_for(lambda: len(metric_steps(store, "rot")) == before, timeout=60, what="the lines before the rotation")
        os.rename(log, tmp_path / "train.log.1")  # logrotate's default `create`
        log.touch()
        time.sleep(0.5)  # the agent sees the new file before the writer goes on (into the renamed one)
        flag.touch()
        assert writer.wait(timeout=60) == 0
        with contextlib.suppress(AssertionError):  # the code before #38 never reads it: count what it lost
            wait_for(lambda: nan_published(store, "rot"), timeout=30, what="the NaN written into the renamed file")
        steps = metric_steps(store, "rot")
        lost = set(range(1, after + 1)) - set(steps)
        print(f"lines lost: {len(lost)}")
        assert not lost
        assert nan_published(store, "rot")
        assert max(steps.values()) == 1
        assert agent.poll() is None
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        stop_process(agent)
        print("--- agent.log (tail)\n" + (tmp_path / "agent.log").read_text(errors="replace")[-3000:])


def lines(first: int, last: int, *, loss: str, nan_at: int | None = None) -> str:
    return "".join(f"step={s} loss={'nan' if s == nan_at else loss}\n" for s in range(first, last + 1))


def test_a_log_truncated_and_grown_again_while_the_agent_is_down_is_read_again(
    store: EventStore, settings_file: Path, tmp_path: Path
) -> None:
    log, agent_log = tmp_path / "train.log", tmp_path / "agent.log"
    log.write_text("starting training\n" + lines(1, 100, loss="1.0000"))
    agent = spawn(settings_file, agent_log, "agent", "--watch", f"cut={log}")
    try:
        wait_for(lambda: len(metric_steps(store, "cut")) == 100, timeout=60, what="the first launch's lines")
    finally:
        stop_process(agent)  # saves its offset: the end of step 100
    assert agent.returncode == 0
    with open(log, "r+") as f:  # copytruncate (or a relaunch writing it again), then the new run's lines
        f.truncate(0)
    log.write_text("starting training\n" + lines(1, 150, loss="0.5000", nan_at=40))
    agent = spawn(settings_file, agent_log, "agent", "--watch", f"cut={log}")
    try:
        second = lambda: [e for e in events_of(store, "cut", t.METRIC) if e.data.get("loss") != 1.0]  # noqa: E731
        wait_for(lambda: any(e.data["step"] == 150 for e in second()), timeout=60, what="the relaunch's last line")
        read = {e.data["step"] for e in second()}
        print(f"lines lost: {150 - len(read)}")
        assert read == set(range(1, 151))
        assert nan_published(store, "cut")
        assert "truncated or replaced" in agent_log.read_text()
    finally:
        stop_process(agent)
        print("--- agent.log (tail)\n" + agent_log.read_text(errors="replace")[-3000:])


def test_a_half_written_line_read_before_a_kill_9_is_one_sample(store: EventStore, settings_file: Path,
                                                               tmp_path: Path) -> None:  # fmt: skip
    log, agent_log = tmp_path / "train.log", tmp_path / "agent.log"
    state = tmp_path / "offsets.json"  # the settings file's agent.state_file
    log.write_text(lines(1, 5, loss="1.5000"))
    start = log.stat().st_size
    with open(log, "a") as f:
        f.write("step=6 loss=nan")  # the writer is interrupted mid-line
    agent = spawn(settings_file, agent_log, "agent", "--watch", f"half={log}")
    try:
        wait_for(lambda: metric_steps(store, "half")[6] == 1, timeout=60, what="the half-written line's NaN")

        def saved() -> dict[str, object]:
            return json.loads(state.read_text())["logs"]["half"] if state.exists() else {}

        wait_for(lambda: saved().get("offset") == start, timeout=30, what="the offset saved at the partial line")
        with contextlib.suppress(AssertionError):  # its values saved beside it (the code before #38 never saves them)
            wait_for(lambda: saved().get("partial"), timeout=5, what="the partial line saved")
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait()
    finally:
        stop_process(agent)
    with open(log, "a") as f:
        f.write("\n" + lines(7, 7, loss="1.4000"))
    agent = spawn(settings_file, agent_log, "agent", "--watch", f"half={log}")
    try:
        wait_for(lambda: metric_steps(store, "half")[7] == 1, timeout=60, what="the line after the completed one")
        steps = metric_steps(store, "half")
        print(f"samples of step 6: {steps[6]}")
        assert steps == Counter(range(1, 8))
    finally:
        stop_process(agent)
        print("--- agent.log (tail)\n" + agent_log.read_text(errors="replace")[-3000:])

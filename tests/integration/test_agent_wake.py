"""The agent waits for its logs to grow (agent.wake): real files, real writer processes, a real Redis."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from trainwarden.agent.publisher import Publisher
from trainwarden.agent.runner import Agent, AgentConfig
from trainwarden.agent.wake import Growth
from trainwarden.agent.watch import RunWatch
from trainwarden.events import types as t

from tests.helpers import events_of, wait_for


def _append_later(path: Path, text: str, after_s: float = 0.2) -> subprocess.Popen[bytes]:
    """A real process that appends `text` to `path` a moment from now (argv only: no user text in a shell)."""
    code = f"import time; time.sleep({after_s}); f = open({str(path)!r}, 'a'); f.write({text!r}); f.close()"
    return subprocess.Popen(["python3", "-c", code])


@pytest.mark.parametrize("use_inotify", [True, False], ids=["inotify", "stat"])
def test_a_wait_ends_when_a_real_process_appends_to_the_log(tmp_path, use_inotify):
    log = tmp_path / "train.log"
    log.write_text("")
    growth = Growth(use_inotify=use_inotify)
    stop = threading.Event()
    try:
        assert not growth.wait([log], 0.1, stop=stop, every=0.02)  # nothing written: the wait runs out
        writer = _append_later(log, "step=1 loss=2.5\n")
        assert growth.wait([log], 30.0, stop=stop, every=0.02)
        writer.wait(timeout=30)
    finally:
        growth.close()


def test_a_file_written_beside_the_log_does_not_end_the_wait(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    growth = Growth()
    stop = threading.Event()
    try:
        growth.wait([log], 0.0, stop=stop, every=0.02)  # watched from here on
        writer = _append_later(tmp_path / "checkpoint.bin", "x" * 1000, after_s=0.0)
        writer.wait(timeout=30)
        assert not growth.wait([log], 0.3, stop=stop, every=0.02) or not growth.inotify
    finally:
        growth.close()


@pytest.mark.parametrize("use_inotify", [True, False], ids=["inotify", "stat"])
def test_a_rotated_log_and_a_log_whose_directory_comes_later_end_the_wait(tmp_path, use_inotify):
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=2.5\n")
    later = tmp_path / "not_yet" / "train.log"
    growth = Growth(use_inotify=use_inotify)
    stop = threading.Event()
    try:
        growth.wait([log, later], 0.0, stop=stop, every=0.02)
        log.rename(tmp_path / "train.log.1")
        log.write_text("step=1 loss=2.4\n")  # logrotate's `create`: a new file at the path
        assert growth.wait([log, later], 30.0, stop=stop, every=0.02)
        later.parent.mkdir()
        writer = _append_later(later, "step=1 loss=2.5\n", after_s=0.0)
        assert wait_for(lambda: growth.wait([log, later], 0.5, stop=stop, every=0.02), timeout=30)
        writer.wait(timeout=30)
    finally:
        growth.close()


@pytest.mark.redis
def test_the_running_agent_reads_appended_and_rotated_logs_and_does_not_step_while_they_are_quiet(store, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    agent = Agent(publisher=Publisher(store), host="gpu1", watches=[RunWatch(run="exp01", log=log)],
                  config=AgentConfig(poll_interval_s=0.05, control_interval_s=0.5))  # fmt: skip
    steps = [0]
    step = agent.step

    def counted() -> int:
        steps[0] += 1
        return step()

    agent.step = counted  # type: ignore[method-assign]
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, kwargs={"stop": stop}, daemon=True)
    thread.start()
    try:
        _append_later(log, "step=1 loss=2.5\n").wait(timeout=30)
        wait_for(lambda: [e.data for e in events_of(store, "exp01", t.METRIC)] == [{"step": 1, "loss": 2.5}])
        log.rename(tmp_path / "train.log.1")
        _append_later(log, "step=2 loss=2.4\n", after_s=0.0).wait(timeout=30)
        wait_for(lambda: [e.data["step"] for e in events_of(store, "exp01", t.METRIC)] == [1, 2])
        before = steps[0]
        stop.wait(1.0)  # quiet: at most one step per 0.5 s (control_interval_s), not one per 0.05 s
        assert steps[0] - before <= 5
    finally:
        stop.set()
        thread.join(timeout=30)

"""One run's log directory the agent may not enter (chmod 000, a re-mounted NFS, a home made private)
is that run's problem: the agent, run without CAP_DAC_OVERRIDE (with it, root ignores file modes),
keeps watching every other run and says once, in the run's own events, why it cannot read this one.

Real redis-server, the real `trainwarden agent` process started through `setpriv` with the capabilities
that bypass file modes dropped: file modes then bind it as they bind a user (its interpreter lives
under /root here, so it stays uid 0 rather than becoming `nobody`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from trainwarden.events import types as t

from tests.conftest import REPO
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis]

USER = "root"
AS_USER = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"]


def steps(store, run: str) -> list[int]:
    return [e.data["step"] for e in events_of(store, run, t.METRIC)]


@pytest.fixture
def shared_dir(tmp_path: Path) -> Path:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the agent without CAP_DAC_OVERRIDE")
    return tmp_path


def append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def start_agent(base: Path, redis_url: str, *, private: bool = False) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """The real agent, without the capabilities that bypass file modes, watching exp01 and exp02 (each in its
    own directory, its log at step 1; `private`: exp02's made private before it starts); returns it, exp02's
    directory and the agent's own log."""
    data = base / "data"
    data.mkdir()
    for run in ("exp01", "exp02"):
        (base / run).mkdir()
        (base / run / "train.log").write_text("step=1 loss=2.0\n")
    if private:
        (base / "exp02").chmod(0o000)
    settings = base / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": redis_url, "host": "testhost", "data_dir": str(data),
        "agent": {"state_file": str(data / "offsets.json"), "poll_interval_s": 0.02, "heartbeat_interval_s": 0.2,
                  "process_interval_s": 0.2},
    }))  # fmt: skip
    said = base / "agent.log"
    watches = [a for run in ("exp01", "exp02") for a in ("--watch", f"{run}={base / run / 'train.log'}")]
    argv = [*AS_USER, sys.executable, "-m", "trainwarden", "--config", str(settings), "--log-level", "WARNING",
            "agent", *watches]  # fmt: skip
    with open(said, "ab") as sink:
        agent = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, cwd=REPO)  # fmt: skip
    return agent, base / "exp02", said


def stop(agent: subprocess.Popen[bytes], bad_dir: Path, said: Path) -> None:
    bad_dir.chmod(0o777)
    if agent.poll() is None:
        agent.terminate()
        agent.wait(timeout=30)
    print(said.read_text()[-3000:])


def test_a_run_dir_the_agent_may_not_enter_costs_that_run_only(store, redis_server, shared_dir: Path) -> None:
    agent, bad_dir, said = start_agent(shared_dir, redis_server.url)
    good, bad = shared_dir / "exp01" / "train.log", bad_dir / "train.log"
    try:
        wait_for(lambda: steps(store, "exp01") == [1] and steps(store, "exp02") == [1], timeout=30,
                 what="step 1 of both runs")  # fmt: skip
        bad_dir.chmod(0o000)  # exp02's directory: no longer the agent's to enter
        beats = len(events_of(store, "exp01", t.AGENT_HEARTBEAT))
        wait_for(lambda: len(events_of(store, "exp01", t.AGENT_HEARTBEAT)) >= beats + 5 or agent.poll() is not None,
                 timeout=30, what="five more heartbeats")  # fmt: skip
        assert agent.poll() is None, said.read_text()[-3000:]
        for step in (2, 3):
            append(good, f"step={step} loss=1.9\n")
        wait_for(lambda: steps(store, "exp01") == [1, 2, 3], timeout=20, what="exp01's steps 2 and 3")

        def warned():
            return [e for e in events_of(store, "exp02", t.SOURCE_STATUS) if "permission denied" in
                    str(e.data.get("reason"))]  # fmt: skip

        warning = wait_for(warned, timeout=20, what="exp02's warning")
        beats = len(events_of(store, "exp01", t.AGENT_HEARTBEAT))
        wait_for(lambda: len(events_of(store, "exp01", t.AGENT_HEARTBEAT)) >= beats + 5, timeout=20,
                 what="five more heartbeats")  # fmt: skip
        assert len(warned()) == 1, warned()  # once, not every tick
        reason = warning[0].data["reason"]
        assert str(bad_dir) in reason and f"the agent runs as {USER}" in reason, reason
        assert events_of(store, "exp02", t.AGENT_HEARTBEAT)[-1].data["sources"]["log"] != "ok"

        bad_dir.chmod(0o777)  # given back: read on from where it was, nothing lost
        append(bad, "step=2 loss=1.9\n")
        wait_for(lambda: steps(store, "exp02") == [1, 2], timeout=20, what="exp02's step 2 once readable again")
        assert steps(store, "exp01") == [1, 2, 3]  # none lost, none twice
        assert agent.poll() is None, said.read_text()[-3000:]
    finally:
        stop(agent, bad_dir, said)


def test_an_agent_started_while_a_run_dir_is_private_watches_the_others(store, redis_server, shared_dir: Path) -> None:
    """Under systemd a crashing agent restarts into the same directory: it must come up, not crash-loop."""
    agent, bad_dir, said = start_agent(shared_dir, redis_server.url, private=True)
    try:
        wait_for(lambda: steps(store, "exp01") == [1] or agent.poll() is not None, timeout=30, what="exp01's step 1")
        wait_for(lambda: len(events_of(store, "exp02", t.AGENT_HEARTBEAT)) >= 3 or agent.poll() is not None,
                 timeout=30, what="exp02's heartbeats")  # fmt: skip
        assert agent.poll() is None, said.read_text()[-3000:]
        reasons = [str(e.data.get("reason")) for e in events_of(store, "exp02", t.SOURCE_STATUS)]
        assert any(f"permission denied on {bad_dir}" in r for r in reasons), reasons
        bad_dir.chmod(0o777)
        wait_for(lambda: steps(store, "exp02") == [1], timeout=20, what="exp02's step 1 once readable")
    finally:
        stop(agent, bad_dir, said)

"""One agent per host, enforced: two `trainwarden agent` processes for one host send a STOP's SIGINT once
(a second Ctrl-C during a clean shutdown means "kill now" to Lightning, accelerate and most loops); the
standby takes over when the holder is killed (kill -9) and watches the run on from where it was.

Real redis-server, two real `trainwarden agent` processes, a real training process that counts the
SIGINTs it receives into a file and takes a while to save its checkpoint before it exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.remote.agent_stop import send_stop

from tests.conftest import cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

LEASE_S = 3.0
HOLDS = "holds the agent/testhost lease (fencing token"
STANDS_BY = "standing by"
STARTED = "without GPU samples"  # what an agent with no NVML (this machine) says once it is built

# counts each SIGINT into a file; on the first it "saves a checkpoint" for a while, then exits
TRAIN = """
import signal, sys, time
count, stopping = sys.argv[1], []
def caught(signum, frame):
    with open(count, "a") as f:
        f.write("SIGINT\\n")
    stopping.append(time.monotonic())
signal.signal(signal.SIGINT, caught)
step = 0
while not stopping or time.monotonic() - stopping[0] < 2.0:
    step += 1
    print(f"step={step} loss={4.2 * 0.99**step:.4f}", flush=True)
    time.sleep(0.1)
"""


def holder(logs: dict[str, Path]) -> str | None:
    """The agent whose log says it holds the lease (one only)."""
    holding = [name for name, log in logs.items() if HOLDS in log.read_text(errors="replace")]
    return holding[0] if len(holding) == 1 else None


def test_two_agents_stop_once_and_the_standby_takes_over_from_a_killed_one(store, settings_file: Path,
                                                                           tmp_path: Path) -> None:  # fmt: skip
    body = yaml.safe_load(settings_file.read_text())
    body["agent"].update({"heartbeat_interval_s": 0.2, "process_interval_s": 0.2, "lease_s": LEASE_S})
    settings_file.write_text(yaml.safe_dump(body))
    count, log = tmp_path / "sigints", tmp_path / "train.log"
    with open(log, "ab") as sink:
        train = subprocess.Popen([sys.executable, "-c", TRAIN, str(count)], stdout=sink, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    logs = {name: tmp_path / f"{name}.log" for name in ("agent1", "agent2")}
    agents = {name: spawn(settings_file, logs[name], "agent") for name in logs}
    try:
        wait_for(lambda: holder(logs) or all(STARTED in p.read_text() for p in logs.values()), timeout=60,
                 what="both agents started")  # fmt: skip
        added = subprocess.run(cli_argv(settings_file, "watch", "exp01", "--log", str(log), "--pid", str(train.pid)),
                               check=False, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert added.returncode == 0, added.stdout + added.stderr
        wait_for(lambda: events_of(store, "exp01", t.METRIC), timeout=30, what="exp01's metrics")

        request = make_event(t.STOP_REQUESTED, run="exp01", host="worker", producer="test/stop", seq=1,
                             data={"reason": "loss too high", "by": "test"})  # fmt: skip
        store.append([request])
        send_stop(store, host="testhost", request=request, reply_as="act/test/stop")
        train.wait(timeout=60)
        done = wait_for(lambda: [e for e in events_of(store, "exp01", t.STOP_DONE)], timeout=30, what="stop.done")
        ended = wait_for(lambda: events_of(store, "exp01", t.RUN_FINISHED) + events_of(store, "exp01", t.RUN_FAILED),
                         timeout=30, what="the run's end")  # fmt: skip
        assert count.read_text().splitlines() == ["SIGINT"], "a second Ctrl-C reached the run: its checkpoint is lost"
        assert len(done) == 1 and len(ended) == 1, (done, ended)
        assert all(agents[n].poll() is None for n in agents)
        first = wait_for(lambda: holder(logs), timeout=10, what="one agent holding the lease")
        other = "agent2" if first == "agent1" else "agent1"
        assert STANDS_BY in logs[other].read_text()

        # the holder is killed: the standby takes over within the lease's TTL and watches on
        os.killpg(agents[first].pid, signal.SIGKILL)
        agents[first].wait()
        wait_for(lambda: HOLDS in logs[other].read_text(), timeout=LEASE_S * 3, what="the standby taking over")
        log2 = tmp_path / "train2.log"
        log2.write_text("step=1 loss=2.0\n")
        added = subprocess.run(cli_argv(settings_file, "watch", "exp02", "--log", str(log2)), check=False,
                               capture_output=True, text=True, timeout=120)  # fmt: skip
        assert added.returncode == 0, added.stdout + added.stderr
        wait_for(lambda: events_of(store, "exp02", t.METRIC), timeout=30, what="exp02's metric, read by the new holder")
        assert count.read_text().splitlines() == ["SIGINT"]  # the new holder did not carry out the old stop again
    finally:
        if train.poll() is None:
            train.kill()
        for proc in agents.values():
            stop_process(proc)
        for name, path in logs.items():
            print(f"--- {name}.log\n{path.read_text()[-3000:]}")

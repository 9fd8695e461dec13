"""`trainwarden watch --pid` with a pid a STOP must never signal (1 is init, 0 the caller's own process group,
-1 every process it may signal) is refused in one line; and a run added with `--pid` that ends normally is
`finished` (its exit code cannot be known: it is not our child), not a critical "run failed".

Real redis-server, the real agent, dispatcher and worker as processes, a real training process."""

import subprocess
import sys

import pytest
from trainwarden.events import types as t
from trainwarden.events.keys import Keys

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis]


def watch(settings_file, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_argv(settings_file, "watch", *args), capture_output=True, text=True, timeout=60,
                          cwd=REPO, check=False)  # fmt: skip


@pytest.mark.parametrize("pid", ["1", "0", "-1"])
def test_a_pid_a_stop_must_never_signal_is_refused(settings_file, r, tmp_path, pid):
    out = watch(settings_file, "exp01", "--log", str(tmp_path / "x.log"), "--pid", pid)
    assert out.returncode == 1 and out.stdout == "", out
    (line,) = out.stderr.strip().splitlines()
    assert f"pid must be a process id of 2 or more (a training process), got {pid}" in line
    assert not r.exists(Keys().agent_control("testhost"))  # nothing reached the agent


def test_a_watched_pid_that_ends_normally_is_finished_not_failed(settings_file, store, tmp_path):
    log = tmp_path / "own.log"
    go = tmp_path / "go"  # it trains once the agent watches it (a busy machine may take seconds to)
    script = ("import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)\n"
              "for s in range(1, 40):\n    print(f'step={s} loss={2.0 - s / 100:.4f}', flush=True)\n"
              "    time.sleep(0.05)\n")  # fmt: skip
    with open(log, "wb") as sink:
        proc = subprocess.Popen([sys.executable, "-c", script, str(go)], stdout=sink, stderr=subprocess.STDOUT)
    daemons = [spawn(settings_file, tmp_path / f"{n}.log", n) for n in ("agent", "dispatcher", "worker")]
    try:
        wait_for(lambda: store.redis.exists(Keys().beat("agent@testhost")), timeout=30, what="the agent's heartbeat")
        added = watch(settings_file, "own", "--log", str(log), "--pid", str(proc.pid))
        assert added.returncode == 0, added.stderr
        go.touch()
        assert proc.wait(timeout=30) == 0
        (finished,) = wait_for(lambda: events_of(store, "own", t.RUN_FINISHED), timeout=30, what="run.finished")
        wait_for(lambda: events_of(store, "own", t.DECISION), timeout=30, what="the worker's evaluation")
    finally:
        proc.kill()
        for p in daemons:
            stop_process(p)
    assert finished.data["exit_code"] is None and "cannot be known" in finished.data["reason"]
    assert not events_of(store, "own", t.RUN_FAILED)
    opened = [e.data for e in events_of(store, "own", t.ANOMALY_OPENED)]
    assert not [d for d in opened if d["severity"] == "critical"], opened

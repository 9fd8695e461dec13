"""Poison entries in a run's log (nested thousands deep, overflowing numbers) are dead-lettered; the run goes on.

Real redis-server, the real dispatcher and worker as processes, a real tmux run to stop.
"""

import subprocess
import sys

import pytest
from trainwarden.events import types as t
from trainwarden.remote.local_launch import LaunchSpec, launch_local
from trainwarden.remote.stop import LocalTmuxController, StopTarget

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, metric, nan_metric, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.tmux]

POISON = {
    "brackets": "[" * 100_000,  # what `redis-cli XADD ... e "$(python3 -c 'print("["*100000)')"` stores
    "deep data": '{"i":"gpu1/log/$r/g0:3","s":1000.0,"d":{"x":' + "[" * 5000 + "]" * 5000 + "}}",
    "overflow": '{"i":"gpu1/log/$r/g0:4","s":1000.0,"d":{"step":1e400,"loss":-1e400}}',
    "text step": '{"i":"gpu1/log/$r/g0:5","s":1000.0,"d":{"step":"abc","loss":1.0}}',
}


def test_poison_entries_are_dead_lettered_and_the_nan_after_them_is_stopped(store, r, tmp_path, tmux_socket,
                                                                            settings_file):  # fmt: skip
    spec = LaunchSpec(run="exp01", command=(sys.executable, "-c", "import time; time.sleep(120)"), workdir=REPO,
                      log_path=tmp_path / "exp01.log", tmux_socket=tmux_socket)  # fmt: skip
    launched = launch_local(spec, store=store, host="testhost")
    target = StopTarget.from_launch("exp01", launched.data, default_host="testhost")
    store.append([metric("exp01", 1, step=1, loss=2.0)])
    poison_ids = [r.xadd(store.keys.log("exp01"), {"e": raw}).decode() for raw in POISON.values()]
    store.append([metric("exp01", 6, step=6, loss=2.1), nan_metric("exp01", 7)])

    procs = [spawn(settings_file, tmp_path / f"{name}.log", name) for name in ("dispatcher", "worker")]
    try:
        wait_for(lambda: events_of(store, "exp01", t.STOP_DONE), timeout=30, what="stop.done")
    finally:
        for p in procs:
            stop_process(p)
        for name in ("dispatcher", "worker"):
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])

    assert not LocalTmuxController().is_running(target)
    (stop,) = [e for e in events_of(store, "exp01", t.DECISION) if e.data["decision"] == t.STOP]
    assert stop.data["reason"] == "loss=nan at step 7"  # not "loss=-inf at step inf" from the overflow entry
    letters = {d.sid: d for d in store.dead_letters()}
    assert sorted(letters) == sorted(poison_ids)
    assert all(d.source == store.keys.log("exp01") for d in letters.values())
    reasons = [letters[sid].reason for sid in poison_ids]
    assert "nested deeper" in reasons[0] and "nested deeper" in reasons[1]
    assert "out of range" in reasons[2] or "step must be" in reasons[2]
    assert "step is not a number" in reasons[3]

    replay = subprocess.run(cli_argv(settings_file, "replay", "exp01"), capture_output=True, text=True, timeout=60,
                            cwd=REPO, check=False)  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.count("!! undecodable") == len(POISON)
    assert "stop.done" in replay.stdout  # it went on past them

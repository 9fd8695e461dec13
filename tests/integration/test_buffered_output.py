"""A plain, block-buffered `print` loop, as a lab runs it: PYTHONUNBUFFERED is unset in the test's own
environment (this machine exports it), so the tmux server `launch` starts and every process under it lack it.
Only trainwarden's own launch environment (remote/wrapper.py LAUNCH_ENV) can make the NaN reach the log in
time: without it the loop's 8 KB buffer fills at about step 400, 80 s after the NaN at step 30."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trainwarden.events import types as t
from trainwarden.remote.local_launch import LaunchSpec, launch_local

from tests.conftest import cli_argv, watch_until_stopped
from tests.helpers import events_of

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.slow]

# No flush anywhere; the time of the NaN's print goes to a file of its own (closed, so it is on disk).
LOOP = """
import sys, time
for step in range(1, 601):
    print(f"step={step} loss={'nan' if step == 30 else 2.0 - step / 1000}")
    if step == 30:
        with open(sys.argv[1], "w") as f:
            f.write(repr(time.time()))
    time.sleep(0.2)
"""


@pytest.fixture
def as_a_lab(monkeypatch):
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)


def test_a_buffered_print_loop_under_launch_is_stopped_within_a_second_of_its_nan(
    as_a_lab, store, tmp_path, tmux_socket, settings_file
):
    log, printed = tmp_path / "train.log", tmp_path / "nan-printed-at"
    spec = LaunchSpec(run="exp01", command=(sys.executable, "-c", LOOP, str(printed)), workdir=tmp_path, log_path=log,
                      tmux_socket=tmux_socket)  # fmt: skip
    launch_local(spec, store=store, host="testhost")
    watch_until_stopped(settings_file, store, tmp_path, "exp01", log)

    (stop,) = [e for e in events_of(store, "exp01", t.DECISION) if e.data["decision"] == t.STOP]
    assert stop.data["reason"] == "loss=nan at step 30"
    ended = Path(f"{log}.exit")
    assert not ended.exists() or ended.read_text().strip() != "0"  # stopped, not run to its end
    latency = stop.ts - float(printed.read_text())
    print(f"buffered print loop: NaN printed -> STOP decided in {latency * 1000:.0f} ms")


def test_a_run_that_asks_for_buffering_keeps_it(as_a_lab, store, tmp_path, tmux_socket):
    """An empty PYTHONUNBUFFERED in the run's own env is its choice, and wins over launch's default."""
    probe = "import os, sys; print(repr(os.environ.get('PYTHONUNBUFFERED')), file=open(sys.argv[1], 'w'))"
    for env, expected in (({}, "'1'"), ({"PYTHONUNBUFFERED": ""}, "''")):
        seen = tmp_path / f"seen-{len(env)}"
        spec = LaunchSpec(run=f"env{len(env)}", command=(sys.executable, "-c", probe, str(seen)), workdir=tmp_path,
                          log_path=tmp_path / f"env{len(env)}.log", tmux_socket=tmux_socket, env=env)  # fmt: skip
        launch_local(spec, store=store, host="testhost")
        deadline = time.monotonic() + 20
        while not (seen.exists() and seen.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert seen.read_text().strip() == expected


@pytest.mark.parametrize("flags, env, warned", [
    ((), {}, True),  # plain python into a file: block-buffered
    (("-u",), {}, False),
    ((), {"PYTHONUNBUFFERED": "1"}, False),
])  # fmt: skip
def test_watch_pid_warns_of_a_buffered_python(as_a_lab, settings_file, tmp_path, flags, env, warned):
    with open(tmp_path / "train.log", "wb") as sink:
        child = subprocess.Popen([sys.executable, *flags, "-c", "import time; time.sleep(60)"], stdout=sink,
                                 env={**os.environ, **env})  # fmt: skip
    try:
        done = subprocess.run(cli_argv(settings_file, "watch", "exp01", "--log", str(tmp_path / "train.log"), "--pid",
                                       str(child.pid), "--timeout", "0.1"),
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    finally:
        child.kill()
        child.wait()
    said = f"warning: pid {child.pid} ("
    assert (said in done.stderr) is warned, done.stderr
    if warned:
        assert f"is Python writing to file {tmp_path / 'train.log'} without PYTHONUNBUFFERED" in done.stderr
        assert "`python -u`" in done.stderr and "PYTHONUNBUFFERED=1" in done.stderr and "flush=True" in done.stderr

"""`trainwarden launch` as a new user meets it: Ctrl-C during its start check, and a launch before anything
runs (no Redis, or no agent yet) pointing at `trainwarden up`."""

import os
import signal
import subprocess
import sys

import pytest
from trainwarden.events import types as t
from trainwarden.events.heartbeat import Heartbeat
from trainwarden.remote.stop import tmux_argv

from tests.conftest import REPO, cli_argv
from tests.helpers import events_of, wait_for
from trainwarden.tools.redis_server import free_port

pytestmark = [pytest.mark.redis, pytest.mark.tmux]

SLEEPER = "import time; print('training', flush=True); time.sleep(60)"


def session_alive(socket: str, run: str) -> bool:
    probe = subprocess.run(tmux_argv(socket, "has-session", "-t", f"=train-{run}"), capture_output=True, check=False)
    return probe.returncode == 0


def test_ctrl_c_during_the_start_check_says_the_run_was_started_and_is_followed(store, settings_file, tmp_path,
                                                                                 tmux_socket):  # fmt: skip
    proc = subprocess.Popen(cli_argv(settings_file, "launch", "exp01", "--workdir", str(tmp_path), "--tmux-socket",
                                     tmux_socket, "--check-s", "30", "--", sys.executable, "-c", SLEEPER),
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(lambda: events_of(store, "exp01", t.RUN_LAUNCHED), what="run.launched (the check window begins)")
        os.kill(proc.pid, signal.SIGINT)  # what Ctrl-C in its terminal sends it
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "trainwarden: interrupted: exp01 was started and is being followed" in err
    assert "`trainwarden check exp01`" in err and "`trainwarden stop exp01` to stop it" in err
    assert session_alive(tmux_socket, "exp01")  # the run goes on ...
    control = store.redis.xrange(store.keys.agent_control("testhost"))
    assert [f[b"run"] for _, f in control] == [b"exp01"]  # ... and this host's agent is told to follow it


@pytest.mark.parametrize("command", [["launch", "exp01", "--", "true"], ["health"]])
def test_before_anything_runs_launch_and_health_point_to_up_redis(tmp_path, command):
    settings = tmp_path / "tw.yaml"
    settings.write_text(f"redis_url: redis://127.0.0.1:{free_port()}/0\nhost: testhost\n")  # nothing listens there
    proc = subprocess.run(cli_argv(settings, *command), capture_output=True, text=True, cwd=tmp_path, check=False,
                          timeout=60)  # fmt: skip
    assert proc.returncode == 1
    assert "Redis unreachable" in proc.stderr
    assert "`trainwarden up --redis` starts Redis and the agent, dispatcher, worker and bot" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_daemon_without_redis_is_not_told_to_run_up(tmp_path):
    """A daemon is started by a supervisor (or by `up` itself): the pointer is to its Redis, not to `up`."""
    settings = tmp_path / "tw.yaml"
    settings.write_text(f"redis_url: redis://127.0.0.1:{free_port()}/0\nevidence_dir: {tmp_path}/evidence\n")
    proc = subprocess.run(cli_argv(settings, "dispatcher"), capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 1 and "is Redis running there?" in proc.stderr and "up --redis" not in proc.stderr


def test_health_before_any_daemon_points_to_up(store, settings_file):
    proc = subprocess.run(cli_argv(settings_file, "health"), capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 1
    assert "no daemon has sent a heartbeat" in proc.stdout and "`trainwarden up` starts the agent" in proc.stdout


def test_a_launch_before_the_agent_runs_says_how_to_start_it(store, settings_file, tmp_path, tmux_socket):
    def launch(run: str) -> str:
        proc = subprocess.run(cli_argv(settings_file, "launch", run, "--workdir", str(tmp_path), "--tmux-socket",
                                       tmux_socket, "--check-s", "0", "--", sys.executable, "-c", SLEEPER),
                              capture_output=True, text=True, cwd=REPO, check=False, timeout=60)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    out = launch("exp01")
    assert "no agent runs on this host yet: `trainwarden up` starts it" in out and "follows exp01" in out
    Heartbeat(store.redis, store.keys, role="agent", host="testhost", version="t").beat(force=True)
    out = launch("exp02")
    assert "this host's agent follows it: `trainwarden check exp02`" in out and "no agent runs" not in out

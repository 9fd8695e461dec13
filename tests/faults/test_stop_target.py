"""A stop is done only when the run is gone, and stops never block other runs.

The daemons run "inside" one tmux server (`$TMUX` names it, as when `trainwarden up` runs in a tmux
window) and the runs are launched from another one (the user's terminal in a second tmux): both are
real tmux servers on private sockets. The agent and the stopper must address the run's own server,
recorded by the launch, and never take a session they cannot find for a dead run or a done stop.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from trainwarden.core.tmux import tmux_argv, tmux_env
from trainwarden.events import types as t
from trainwarden.events.keys import Keys
from trainwarden.events.run_view import run_state
from trainwarden.remote.local_launch import LaunchSpec, launch_local
from trainwarden.remote.stop import LocalTmuxController, StopTarget

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.tmux]

TRAINER = [sys.executable, "-m", "trainwarden.tools.demo_train", "--interval", "0.05"]


class TmuxServer:
    """A real tmux server on a private socket, holding one idle session (a user's shell)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        argv = tmux_argv(self.path, "new-session", "-d", "-P", "-F", "#{pid}", "-s", "shell", "sleep", "600")
        self.pid = int(subprocess.run(argv, check=True, capture_output=True, text=True, env=tmux_env()).stdout)

    @property
    def env(self) -> dict[str, str]:
        """The environment of a process started in this server's windows."""
        return {**os.environ, "TMUX": f"{self.path},{self.pid},0"}

    def has(self, session: str) -> bool:
        probe = tmux_argv(self.path, "has-session", "-t", f"={session}")
        return subprocess.run(probe, capture_output=True, check=False, env=tmux_env()).returncode == 0

    def kill(self) -> None:
        subprocess.run(tmux_argv(self.path, "kill-server"), capture_output=True, check=False, env=tmux_env())


@pytest.fixture
def two_servers() -> Iterator[tuple[TmuxServer, TmuxServer]]:
    """The daemons' tmux server and the user's (short socket paths: a unix socket's path is short)."""
    where = Path(tempfile.mkdtemp(prefix="tw-tmux-"))
    servers = (TmuxServer(where / "daemons"), TmuxServer(where / "user"))
    yield servers
    for server in servers:
        server.kill()
    shutil.rmtree(where, ignore_errors=True)


def start_daemons(settings: Path, tmp_path: Path, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    body = yaml.safe_load(settings.read_text())
    body["agent"]["process_interval_s"] = 0.2
    settings.write_text(yaml.safe_dump(body))
    return [spawn(settings, tmp_path / f"{name}.log", name, env=env) for name in ("agent", "dispatcher", "worker")]


def stop_daemons(procs: list[subprocess.Popen[bytes]], tmp_path: Path) -> None:
    for p in procs:
        stop_process(p)
    for name in ("agent", "dispatcher", "worker"):
        print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])


def launch(settings: Path, tmp_path: Path, run: str, user: TmuxServer, *trainer: str) -> None:
    """`trainwarden launch` typed in the user's tmux (no --tmux-socket)."""
    argv = cli_argv(settings, "launch", "--workdir", str(tmp_path), "--check-s", "0", "--no-wandb", run, "--",
                    *trainer)  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, env=user.env, check=False)
    assert done.returncode == 0, done.stderr


def test_a_run_launched_from_another_tmux_server_is_followed_and_its_nan_stopped(
    store, tmp_path, settings_file, two_servers
):
    daemons_tmux, user = two_servers
    procs = start_daemons(settings_file, tmp_path, daemons_tmux.env)
    try:
        wait_for(lambda: store.redis.exists(Keys().beat("agent@testhost")), timeout=30, what="the agent's heartbeat")
        launch(settings_file, tmp_path, "exp01", user, *TRAINER, "--nan-at", "40")
        (launched,) = events_of(store, "exp01", t.RUN_LAUNCHED)
        assert launched.data["tmux_socket"] == user.path and launched.data["pid"], launched.data
        (done,) = wait_for(lambda: events_of(store, "exp01", t.STOP_DONE), timeout=60, what="stop.done")
        ended = wait_for(lambda: events_of(store, "exp01", t.RUN_FAILED) + events_of(store, "exp01", t.RUN_FINISHED),
                         timeout=30, what="the agent to see the run end")  # fmt: skip
    finally:
        stop_daemons(procs, tmp_path)
        print("--- events:", [(e.type, e.data) for e in events_of(store, "exp01") if e.type != t.METRIC])

    assert done.data["method"] == "ctrl-c", done.data  # the run's own session got the Ctrl-C
    assert not user.has("train-exp01") and daemons_tmux.has("shell")
    assert [e.data["exit_code"] for e in ended] == [130]  # seen to end after the stop, with its exit code
    steps = [e.data.get("step") for e in events_of(store, "exp01", t.METRIC)]
    assert 40 in steps  # followed up to its NaN
    assert run_state(store, "exp01").status == "stopped"
    opened = [e.data["rule"] for e in events_of(store, "exp01", t.ANOMALY_OPENED)]
    assert "run-failed" not in opened  # never taken for dead


def test_ctrl_c_in_the_pane_is_recorded_as_130_every_time(store, tmp_path, settings_file, two_servers):
    daemons_tmux, user = two_servers
    procs = start_daemons(settings_file, tmp_path, daemons_tmux.env)
    codes: list[object] = []
    try:
        for i in range(6):
            run = f"ctrlc{i}"
            launch(settings_file, tmp_path, run, user, *TRAINER, "--nan-at", "100000")
            log = tmp_path / f"{run}.log"
            wait_for(lambda: log.exists() and "step=3 " in log.read_text(), timeout=30, what=f"{run} to train")  # noqa: B023
            subprocess.run(tmux_argv(user.path, "send-keys", "-t", f"=train-{run}:", "C-c"), check=True,
                           env=tmux_env())  # fmt: skip
            (ended,) = wait_for(lambda: events_of(store, run, t.RUN_FAILED) + events_of(store, run, t.RUN_FINISHED),  # noqa: B023
                                timeout=30, what=f"the agent to see {run} end")  # fmt: skip
            codes.append(ended.data["exit_code"])
    finally:
        stop_daemons(procs, tmp_path)
    assert codes == [130] * 6, codes


# A watched run's process: "stubborn" ignores Ctrl-C (SIGINT), and says so in its log; "polite" saves and exits.
WATCHED = """
import signal, sys, time
kind = sys.argv[1]
def on_int(signum, frame):
    print(f"got SIGINT at {time.time():.3f}", flush=True)
    if kind == "polite":
        sys.exit(0)
signal.signal(signal.SIGINT, on_int)
print("up", flush=True)
while True:
    time.sleep(0.05)
"""


def watched_process(tmp_path: Path, name: str, kind: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / f"{name}.log"
    with open(log, "ab") as sink:
        proc = subprocess.Popen([sys.executable, "-c", WATCHED, kind], stdout=sink, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)  # fmt: skip
    wait_for(lambda: "up" in log.read_text(), timeout=30, what=f"{name} to start")
    return proc, log


def cli(settings: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_argv(settings, *args), cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
                          env=env)  # fmt: skip


def test_a_stop_waiting_out_its_grace_does_not_hold_up_another_runs_nan(store, tmp_path, settings_file):
    """One worker (as `up` runs): the agent waits out a 30 s grace for one run while another run's NaN
    arrives; that NaN is decided and stopped at once, and each stop is recorded once."""
    procs = start_daemons(settings_file, tmp_path, {})
    stubborn, stubborn_log = watched_process(tmp_path, "stubborn", "stubborn")
    polite, polite_log = watched_process(tmp_path, "polite", "polite")
    try:
        wait_for(lambda: store.redis.exists(Keys().beat("agent@testhost")), timeout=30, what="the agent's heartbeat")
        for run, proc, log in (("stubborn", stubborn, stubborn_log), ("polite", polite, polite_log)):
            added = cli(settings_file, "watch", run, "--log", str(log), "--pid", str(proc.pid), "--grace", "30")
            assert added.returncode == 0, added.stderr
        asked = cli(settings_file, "stop", "stubborn", "--reason", "testing the grace")
        assert asked.returncode == 0, asked.stderr
        wait_for(lambda: "got SIGINT" in stubborn_log.read_text(), timeout=30, what="the agent's Ctrl-C to stubborn")

        with open(polite_log, "a") as f:  # the trainer's NaN, while the agent waits out stubborn's grace
            f.write("step=1 loss=2.5\nstep=2 loss=nan\n")
            f.flush()
            nan_at = time.time()
        stops = lambda: [e for e in events_of(store, "polite", t.DECISION) if e.data["decision"] == "STOP"]  # noqa: E731
        (decision,) = wait_for(stops, timeout=15, what="the NaN's STOP")
        (done,) = wait_for(lambda: events_of(store, "polite", t.STOP_DONE), timeout=15, what="the NaN's stop.done")
        assert stubborn.poll() is None  # the other stop is still waiting out its grace
        assert polite.wait(timeout=10) == 0 and done.data["method"] == "SIGINT", done.data
        print(f"MEASURED NaN -> STOP decision {decision.ts - nan_at:.3f}s, NaN -> stop.done {done.ts - nan_at:.3f}s "
              f"(stubborn's grace: 30s, one worker)")  # fmt: skip

        (slow,) = wait_for(lambda: events_of(store, "stubborn", t.STOP_DONE), timeout=60, what="stubborn's stop.done")
        assert slow.data["method"] == "SIGTERM", slow.data  # after the 30 s grace
        assert stubborn.wait(timeout=10) == -15
        # the worker settles the action it handed over: nothing left pending (a turn after the grace: slow when loaded)
        for run in ("stubborn", "polite"):
            wait_for(lambda: b'"kind": "stop"' not in (store.redis.hget(Keys().cursor(run), "pending") or b""),  # noqa: B023
                     timeout=90, what=f"{run}'s stop action settled")  # fmt: skip
    finally:
        for proc in (stubborn, polite):
            proc.kill()
            proc.wait()
        stop_daemons(procs, tmp_path)
    for run in ("stubborn", "polite"):  # one request, one outcome each; the log replays to what the workers saw
        assert len(events_of(store, run, t.STOP_DONE)) == 1 and not events_of(store, run, t.STOP_FAILED)
        verified = cli(settings_file, "replay", run, "--verify")
        assert verified.returncode == 0, verified.stdout + verified.stderr


def running(pid: int) -> bool:
    """Whether `pid` still runs: an exited process its parent has not reaped yet (a zombie: tmux may leave one
    for a while) has ended, as the stop itself judges (remote/stop.py)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def test_no_such_session_on_a_server_that_is_not_the_runs_is_a_failed_stop(store, tmp_path, two_servers):
    """Asked on the wrong tmux server, the stopper says so and stops nothing; on the right one it is done once
    the recorded pid is gone."""
    wrong, user = two_servers
    spec = LaunchSpec(run="exp01", command=(*TRAINER, "--nan-at", "100000"), workdir=tmp_path,
                      log_path=tmp_path / "exp01.log", tmux_socket=user.path)  # fmt: skip
    launched = launch_local(spec, store=store, host="testhost")
    target = StopTarget.from_launch("exp01", launched.data, default_host="testhost")  # type: ignore[arg-type]
    assert target.pid is not None and target.tmux_socket == user.path

    astray = LocalTmuxController().stop(replace(target, tmux_socket=wrong.path))
    assert not astray.ok and "its session is on another tmux server; nothing was stopped" in astray.detail, astray
    assert user.has("train-exp01") and running(target.pid)

    done = LocalTmuxController().stop(target)
    assert done.ok and done.method == "ctrl-c", done
    assert not user.has("train-exp01") and not running(target.pid)
    again = LocalTmuxController().stop(replace(target, tmux_socket=wrong.path))  # session and pid gone: done
    assert again.ok and "already ended" in again.detail


def test_a_watched_session_on_another_tmux_server_is_stopped_there(store, tmp_path, settings_file, two_servers):
    """`trainwarden watch --tmux-session S` typed in the user's tmux names that server; the agent, in another
    tmux, stops the run there (Ctrl-C) and says `stop.done` only once it is gone."""
    daemons_tmux, user = two_servers
    log = tmp_path / "mine.log"
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(WATCHED)} polite >> {shlex.quote(str(log))} 2>&1"
    subprocess.run(tmux_argv(user.path, "new-session", "-d", "-s", "mine", "bash", "-c", command), check=True,
                   env=tmux_env())  # fmt: skip
    wait_for(lambda: log.exists() and "up" in log.read_text(), timeout=30, what="the run to start")
    procs = start_daemons(settings_file, tmp_path, daemons_tmux.env)
    try:
        wait_for(lambda: store.redis.exists(Keys().beat("agent@testhost")), timeout=30, what="the agent's heartbeat")
        added = cli(settings_file, "watch", "mine", "--log", str(log), "--tmux-session", "mine", env=user.env)
        assert added.returncode == 0, added.stderr
        nowhere = cli(settings_file, "watch", "x", "--log", str(log), "--tmux-session", "nosuch", env=user.env)
        assert nowhere.returncode != 0 and "your tmux server has no such session" in nowhere.stderr, nowhere.stderr
        stopped = cli(settings_file, "stop", "mine", "--wait", "--reason", "enough")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    finally:
        stop_daemons(procs, tmp_path)
    (watched,) = events_of(store, "mine", t.RUN_WATCHED)
    assert watched.data["tmux_socket"] == user.path
    (done,) = events_of(store, "mine", t.STOP_DONE)
    assert done.data["method"] == "ctrl-c", done.data
    assert not user.has("mine") and "got SIGINT" in log.read_text()

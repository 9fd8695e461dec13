"""`trainwarden launch EXP` through the real CLI over real sshd + tmux + redis: its first seconds are
checked like a local launch's, a plan that holds EXP back refuses it (unless --force), and the docs'
4-experiment plan runs as docs/remote.md shows it."""

import getpass
import os
import signal
import subprocess
import time

import pytest
import yaml
from trainwarden.events import types as t

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for
from tests.remote import test_cli_remote
from tests.remote.test_cli_remote import KEY, cli

remote_settings = test_cli_remote.remote_settings  # the fixture: settings, servers.yaml and experiments/

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.ssh, pytest.mark.slow]


def add_experiment(tmp_path, name, **fields):
    body = {"name": name, "server": "gpu1", "command": "python train.py", "wandb": {"project": "proj"},
            "stop_grace_s": 2, **fields}  # fmt: skip
    (tmp_path / "experiments" / f"exp-{name}.yaml").write_text(yaml.safe_dump(body))


def test_a_remote_command_that_exits_3_after_1_s_is_reported_not_launched(remote_settings, store, tmp_path):
    add_experiment(tmp_path, "retF", env={"FAIL_AT": "3", "STEP_S": "0.5"})  # step 1, 2, 3 -> exit 3 after ~1 s
    out = cli(remote_settings, "launch", "retF", env=KEY)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "launched" not in out.stdout
    head, *lines = out.stderr.splitlines()
    assert head.startswith("trainwarden: error: retF exited with code 3 within 1 s of launch; log: gpu1:/")
    assert head.endswith("/train.log; last lines:")
    assert lines[-1] == "  step=3 loss=1.3333"
    (failed,) = events_of(store, "retF", t.RUN_FAILED)  # recorded once, whoever noticed first
    assert failed.data["exit_code"] == 3 and failed.data["log_tail"][-1] == "step=3 loss=1.3333"
    (launched,) = events_of(store, "retF", t.RUN_LAUNCHED)
    assert failed.data["launch"] == launched.seq


def test_launch_of_an_experiment_a_running_plan_holds_back_is_refused_then_forced(remote_settings, store, tmp_path):
    add_experiment(tmp_path, "child", env={"FINISH_AT": "3", "STEP_S": "0.05"}, depends_on=["long"])
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: p2\nexperiments: [long, child]\n")
    runner = spawn(remote_settings, tmp_path / "plan.log", "plan", "run", str(plan), env=KEY)
    try:
        wait_for(lambda: events_of(store, "long", t.RUN_STARTED), timeout=60, what="long started by the plan")
        refused = cli(remote_settings, "launch", "child", env=KEY)
        assert refused.returncode == 1
        assert events_of(store, "child", t.RUN_LAUNCHED) == []
        head = refused.stderr.splitlines()[0]
        since = time.strftime("%H:%M", time.localtime(events_of(store, "plan-p2", t.PLAN_STEP)[-1].ts))
        assert head == (f"trainwarden: error: child waits for long in plan p2 (long is running since {since}); wait, "
                        "or `trainwarden launch child --force` to launch outside the plan [run=child]")  # fmt: skip
        forced = cli(remote_settings, "launch", "child", "--force", env=KEY)
        assert forced.returncode == 0, forced.stderr
        assert "--force: launching outside plan p2, which holds it back: child waits for long" in forced.stdout
        (launched,) = events_of(store, "child", t.RUN_LAUNCHED)
        assert launched.data["forced"]["by"] == getpass.getuser() and launched.data["forced"]["plan"] == "p2"
    finally:
        stop_process(runner)


def test_the_docs_four_experiment_plan_runs_in_order_through_the_cli(remote_settings, store, tmp_path):
    """docs/remote.md "Plans", typed as it says: exp1 -> exp2 -> (exp3 || exp4), with the worker up."""
    fast = {"FINISH_AT": "6", "STEP_S": "0.1"}
    add_experiment(tmp_path, "exp1", gpus=1, env=fast)
    add_experiment(tmp_path, "exp2", gpus=1, env=fast, depends_on=["exp1"])
    for name in ("exp3", "exp4"):  # each finishes only once both started: they ran at once
        add_experiment(tmp_path, name, gpus=1, env={**fast, "BARRIER": "exp3,exp4"}, depends_on=["exp2"])
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: sweep1\nexperiments: [exp1, exp2, exp3, exp4]\nmax_parallel: 4\n")
    checked = cli(remote_settings, "config", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    worker = spawn(remote_settings, tmp_path / "worker.log", "worker")
    try:
        out = cli(remote_settings, "plan", "run", str(plan), env=KEY)
    finally:
        stop_process(worker)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "] exp1: launched on gpu1 GPUs [0]" in out.stdout
    assert "plan sweep1 done: exp1=finished, exp2=finished, exp3=finished, exp4=finished" in out.stdout
    names = ("exp1", "exp2", "exp3", "exp4")
    launched = {n: events_of(store, n, t.RUN_LAUNCHED) for n in names}
    assert all(len(v) == 1 for v in launched.values())
    started = {n: v[0] for n, v in launched.items()}
    ended = {n: events_of(store, n, t.RUN_FINISHED)[0] for n in names}
    assert ended["exp1"].ts <= started["exp2"].ts
    assert ended["exp2"].ts <= min(started["exp3"].ts, started["exp4"].ts)
    assert {tuple(started["exp3"].data["gpus"]), tuple(started["exp4"].data["gpus"])} == {(0,), (1,)}
    status = cli(remote_settings, "plan", "status", str(plan))
    assert status.stdout.splitlines()[0] == "plan sweep1: finished"
    assert "  exp4                     finished   (after exp2)" in status.stdout.splitlines()
    # the plan ended with exp3 launched by it: a launch of exp3 now is the user's own, not held back
    assert "waits for" not in cli(remote_settings, "launch", "exp3", "--check-s", "0", env=KEY).stderr


def test_ctrl_c_during_the_remote_start_check_says_the_run_was_started_and_is_followed(remote_settings, store):
    """Ctrl-C while launch waits on the server for a command that fails at once: no traceback; the run goes on.
    (A Ctrl-C just before the check, once the launch is recorded, is said the same: the log is read then.)"""
    proc = subprocess.Popen(cli_argv(remote_settings, "launch", "long", "--check-s", "60"), cwd=REPO,
                            env={**os.environ, **KEY}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        wait_for(lambda: events_of(store, "long", t.RUN_STARTED), timeout=60, what="long started (the check begins)")
        os.kill(proc.pid, signal.SIGINT)  # what Ctrl-C in its terminal sends it
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "trainwarden: interrupted: long was started and is being followed" in err and "log: gpu1:/" in err
    assert events_of(store, "long", t.RUN_FAILED) == [] and events_of(store, "long", t.RUN_FINISHED) == []


def test_ctrl_c_in_the_preflight_says_the_run_was_not_started(remote_settings, store, gpu_server):
    reached = gpu_server.root / "preflight-reached"
    slow = gpu_server.venv / "bin" / "nvidia-smi"  # the GPU check hangs: Ctrl-C comes while it waits
    slow.write_text(f"#!/bin/sh\ntouch {reached}\nsleep 10\n")
    proc = subprocess.Popen(cli_argv(remote_settings, "launch", "long"), cwd=REPO, env={**os.environ, **KEY},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(reached.exists, timeout=60, what="the preflight's GPU check")
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.splitlines()[-1] == "trainwarden: interrupted: long was not started (nothing was recorded, nothing runs)"
    assert events_of(store, "long", t.RUN_LAUNCHED) == []

"""kill -9 of the training process: the run fails, the workers relaunch it from its latest
checkpoint up to max_restarts times, each attempt an event, each said once in Slack and on the console:
RESUMED with the attempt, the checkpoint and the cause; NOT RESUMED with the reason and the fix."""

import io
import os
import signal
import time
from pathlib import Path

import pytest
from trainwarden.bot.notifier import Notifier
from trainwarden.bot.sink import ConsoleSink
from trainwarden.bot.stages import Pipeline
from trainwarden.events import types as t
from trainwarden.remote.control import SshController
from trainwarden.remote.fleet import CheckpointConfig
from trainwarden.remote.liveness import check_remote_run, ended_event
from trainwarden.remote.stop import LocalTmuxController, RoutingController
from trainwarden.workers import context
from trainwarden.workers.context import WorkerContext
from trainwarden.workers.policy_source import PolicySource
from trainwarden.workers.process import process_run

from tests.helpers import events_of, wait_for
from tests.remote.conftest import experiment, launcher
from tests.slack_api import sink_for

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.ssh, pytest.mark.slow]


def kill_training(run_dir: Path) -> None:
    """kill -9 the python process the run's wrapper started (not the wrapper itself)."""
    wrapper = int((run_dir / "pid").read_text())
    children = Path(f"/proc/{wrapper}/task/{wrapper}/children").read_text().split()
    for pid in children:
        if b"train.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(int(pid), signal.SIGKILL)
            return
    raise AssertionError(f"no training process under {wrapper}: {children}")


def notice_end(store, pool, gpu_server, run):
    """What the host's agent (or a plan runner) does: see the run ended and record it once."""
    from trainwarden.events.projection import fold

    state = fold(e for _, e in store.iter_run(run))
    ended = wait_for(lambda: check_remote_run(pool, gpu_server.server, state.launch), what="the run to end")
    store.append_one(ended_event(run, state.launch, state.launch_seq, ended, host="agent", now=time.time()))


def notifier(store, sink, consumer="n1"):
    """The bot's notifier (a fresh one per call: a restarted or second bot) over the real feed."""
    n = Notifier(store=store, sink=sink, consumer=consumer, channel="C1", host="bot",
                 pipeline=Pipeline(flap_threshold=3, flap_window_s=3600.0))  # fmt: skip
    n.reader.ensure_group()
    return n


def drain(n):
    while n.step() > 0:
        pass


def test_killed_run_is_resumed_from_its_latest_checkpoint_then_gives_up(pool, store, gpu_server, tmp_path,
                                                                        slack_api):  # fmt: skip
    ckpt = gpu_server.code / "ckpt"
    ckpt.mkdir()
    (ckpt / "epoch_1.pt").write_text("w1")
    (ckpt / "epoch_2.pt").write_text("w2")
    os.utime(ckpt / "epoch_1.pt", (1, 1))
    exp = experiment(resume_command=("python", "train.py", "--resume", "{checkpoint}"), max_restarts=1,
                     checkpoints=CheckpointConfig(dir=str(ckpt)))  # fmt: skip
    tw = launcher(pool, store, gpu_server, exp)
    tw.launch("exp01")
    run_dir = gpu_server.root / "work" / ".trainwarden" / "runs" / "exp01"
    log = run_dir / "train.log"
    wait_for(lambda: log.exists() and "step=2" in log.read_text(), what="first attempt running")
    remote = SshController(shell=pool, servers={"gpu1": gpu_server.server})
    ctx = WorkerContext(store=store, host="worker", policies=PolicySource(host="worker"), evidence_dir=tmp_path / "ev",
                        controller=RoutingController(local=LocalTmuxController(), remote=remote),
                        launcher=tw, lock_timeout_s=10)  # fmt: skip
    context.install(ctx)
    try:
        kill_training(run_dir)
        notice_end(store, pool, gpu_server, "exp01")
        (failed,) = events_of(store, "exp01", t.RUN_FAILED)
        assert failed.data["exit_code"] == 137
        process_run("exp01", [])
        launches = events_of(store, "exp01", t.RUN_LAUNCHED)
        assert [(e.data["attempt"], e.data["resume"]) for e in launches] == [(1, False), (2, True)]
        assert launches[1].data["command"] == ["python", "train.py", "--resume", str(ckpt / "epoch_2.pt")]
        wait_for(lambda: f"argv ['--resume', '{ckpt / 'epoch_2.pt'}']" in log.read_text(), what="the resumed run")
        process_run("exp01", [])  # a repeat changes nothing: still two launches
        assert len(events_of(store, "exp01", t.RUN_LAUNCHED)) == 2
        drain(notifier(store, sink_for(slack_api)))
        drain(notifier(store, sink_for(slack_api)))  # the bot restarted: nothing twice
        resumed = [x for x in slack_api.texts() if x.startswith("RESUMED")]
        assert resumed == ["RESUMED exp01@gpu1 (attempt 2 of 2) from epoch_2.pt after the training process was "
                           "killed by signal 9 (SIGKILL), exit code 137."]  # fmt: skip
        (parent,) = slack_api.parents()
        assert resumed[0] in [m.text for m in slack_api.replies(parent.ts)]  # in the run's thread

        kill_training(run_dir)  # the resumed run printed its argv above, so it is running
        notice_end(store, pool, gpu_server, "exp01")
        process_run("exp01", [])
        assert len(events_of(store, "exp01", t.RUN_LAUNCHED)) == 2
        (skipped,) = events_of(store, "exp01", t.RESUME_SKIPPED)
        assert "max_restarts (1) reached" in skipped.data["reason"]
        drain(notifier(store, sink_for(slack_api), consumer="n2"))  # a second bot
        drain(notifier(store, sink_for(slack_api)))
        texts = slack_api.texts()
        assert len([x for x in texts if x.startswith("RESUMED")]) == 1
        (gave_up,) = [x for x in texts if x.startswith("NOT RESUMED")]
        assert gave_up.startswith(
            "NOT RESUMED exp01 after attempt 2: max_restarts (1) reached after 2 attempts. "
            "Fix: look into why it keeps failing, then `trainwarden launch exp01 --resume`"
        )
    finally:
        context.install(None)


def test_a_run_we_stopped_is_not_resumed(pool, store, gpu_server, tmp_path):
    exp = experiment(resume_command=("python", "train.py"), max_restarts=3, stop_grace_s=2)
    tw = launcher(pool, store, gpu_server, exp)
    tw.launch("exp01")
    log = gpu_server.root / "work" / ".trainwarden" / "runs" / "exp01" / "train.log"
    wait_for(lambda: log.exists() and "step=2" in log.read_text(), what="the run")
    ctx = WorkerContext(store=store, host="worker", policies=PolicySource(host="worker"), evidence_dir=tmp_path / "ev",
                        controller=SshController(shell=pool, servers={"gpu1": gpu_server.server}),
                        launcher=tw, lock_timeout_s=10)  # fmt: skip
    context.install(ctx)
    try:
        from trainwarden.events.envelope import make_event, time_seq

        store.append_one(make_event(t.STOP_REQUESTED, run="exp01", host="cli", producer="cli/x", seq=time_seq(),
                                    data={"by": "cli", "reason": "test"}))  # fmt: skip
        process_run("exp01", [])
        assert events_of(store, "exp01", t.STOP_DONE)
        notice_end(store, pool, gpu_server, "exp01")
        process_run("exp01", [])
        assert len(events_of(store, "exp01", t.RUN_LAUNCHED)) == 1
        assert events_of(store, "exp01", t.RESUME_SKIPPED) == []
    finally:
        context.install(None)


def test_a_refused_resume_is_said_with_its_reason_and_fix(pool, store, gpu_server, tmp_path):
    """`up` started without WANDB_API_KEY: the worker's relaunch fails preflight, and the console says why
    and what to do (before, only the event log had it)."""
    ckpt = gpu_server.code / "ckpt"
    ckpt.mkdir()
    (ckpt / "epoch_9.pt").write_text("w9")
    exp = experiment(resume_command=("python", "train.py", "--resume", "{checkpoint}"), max_restarts=2,
                     checkpoints=CheckpointConfig(dir=str(ckpt)))  # fmt: skip
    tw = launcher(pool, store, gpu_server, exp, key="")  # the worker's environment has no key
    tw.launch("exp01", preflight=False)
    run_dir = gpu_server.root / "work" / ".trainwarden" / "runs" / "exp01"
    log = run_dir / "train.log"
    wait_for(lambda: log.exists() and "step=2" in log.read_text(), what="first attempt running")
    ctx = WorkerContext(store=store, host="worker", policies=PolicySource(host="worker"), evidence_dir=tmp_path / "ev",
                        controller=SshController(shell=pool, servers={"gpu1": gpu_server.server}),
                        launcher=tw, lock_timeout_s=10)  # fmt: skip
    context.install(ctx)
    console = io.StringIO()
    try:
        kill_training(run_dir)
        notice_end(store, pool, gpu_server, "exp01")
        process_run("exp01", [])
        process_run("exp01", [])
        assert len(events_of(store, "exp01", t.RUN_LAUNCHED)) == 1
        (skipped,) = events_of(store, "exp01", t.RESUME_SKIPPED)
        assert "preflight failed: wandb_login" in skipped.data["reason"]
        drain(notifier(store, ConsoleSink(console)))
        drain(notifier(store, ConsoleSink(console)))  # restarted
    finally:
        context.install(None)
    lines = [line.split("] ", 1)[1] for line in console.getvalue().splitlines() if "NOT RESUMED" in line]
    assert len(lines) == 1, console.getvalue()
    assert lines[0].startswith(
        "NOT RESUMED exp01 after attempt 1: relaunch refused: exp01: preflight failed: wandb_login"
    )
    assert lines[0].endswith("Fix: export WANDB_API_KEY in the environment of `trainwarden up` (the worker launches "
                             "resumes).")  # fmt: skip
    assert lines[0].count("ix: ") == 1, lines[0]  # one fix: the worker's, not also the preflight's "run wandb login"
    assert "FAILED exp01@" in console.getvalue()  # the failure itself is said before it

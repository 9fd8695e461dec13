"""Runs started by hand (not through trainwarden): `trainwarden watch` adds them to the running agent,
and their STOP is carried out by that agent: SIGINT, a grace period, SIGTERM, then SIGKILL."""

import shlex
import subprocess
import sys
import time
import uuid
from dataclasses import replace

import pytest
from trainwarden.agent import procfs
from trainwarden.agent.stopper import signal_ladder
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.heartbeat import Heartbeat, read_beat
from trainwarden.events.keys import Keys
from trainwarden.events.projection import fold
from trainwarden.workers.actions import Awaiting, action_producer, stop_by_agent
from trainwarden.workers.pending import StopRun

from tests.conftest import cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for
from trainwarden.cli.entry import main

pytestmark = [pytest.mark.redis]

# A training-like loop in the README's `key=value` log format. "polite" saves and exits on Ctrl-C
# (SIGINT), as training scripts that trap KeyboardInterrupt do; "stubborn" ignores SIGINT and SIGTERM.
TRAIN = """
import signal, sys, time
kind, nan_at = sys.argv[1], int(sys.argv[2])
def saved(signum, frame):
    print("caught SIGINT: checkpoint saved, exiting", flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, saved if kind == "polite" else signal.SIG_IGN)
if kind == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
for step in range(1, 100000):
    loss = float("nan") if step >= nan_at else 4.2 * 0.99**step
    print(f"step={step} loss={loss:.4f} lr=3e-4", flush=True)
    time.sleep(0.05)
"""


def train(tmp_path, name, kind, nan_at=10**9, *, own_group=False):
    log = tmp_path / f"{name}.log"
    sink = open(log, "ab")  # noqa: SIM115 - the process writes to it until it ends
    argv = [sys.executable, "-c", TRAIN, kind, str(nan_at), f"tag-{name}"]
    proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=own_group)  # fmt: skip
    sink.close()
    return proc, log


def cli(capsys, settings, *args):
    """The command line in this process (a `trainwarden` process costs seconds of imports on a busy CI box)."""
    capsys.readouterr()
    code = main(cli_argv(settings, *args)[3:])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def test_watched_runs_are_stopped_by_their_agent(settings_file, store, worker_ctx, tmp_path, capsys):
    tag = uuid.uuid4().hex[:8]
    polite, polite_log = train(tmp_path, "polite", "polite", own_group=True)  # a job started from a shell
    stubborn, stubborn_log = train(tmp_path, f"stubborn-{tag}", "stubborn", nan_at=40)
    daemons = [spawn(settings_file, tmp_path / f"{n}.log", n) for n in ("agent", "dispatcher", "worker")]
    try:
        wait_for(lambda: store.redis.exists(Keys().beat("agent@testhost")), timeout=30, what="the agent's heartbeat")
        added = cli(capsys, settings_file, "watch", "polite", "--log", str(polite_log), "--pid", str(polite.pid))
        assert added.returncode == 0, added.stderr
        assert f"a STOP sends SIGINT to pid {polite.pid}" in added.stdout
        added = cli(capsys, settings_file, "watch", "stubborn", "--log", str(stubborn_log),
                    "--match", f"tag-stubborn-{tag}", "--grace", "0.5")  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert cli(capsys, settings_file, "watch", "nohow", "--log", str(tmp_path / "nohow.log")).returncode == 0
        beat = read_beat(store.redis, store.keys, "agent@testhost")
        assert beat is not None and beat.pid == daemons[0].pid  # the one agent took them up; none was started

        # a STOP asked from the command line: SIGINT, and the run saves and exits
        stopped = cli(capsys, settings_file, "stop", "polite", "--wait", "--timeout", "40", "--reason", "lr too high")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert f"stopped polite: sent SIGINT to pid {polite.pid}" in stopped.stdout
        assert polite.wait(timeout=10) == 0 and "caught SIGINT" in polite_log.read_text()
        # the same request again (a worker that died before its commit): sent again, the agent does not
        # repeat it, and the worker finds the outcome recorded: carried out and recorded once
        (first,) = events_of(store, "polite", t.STOP_DONE)
        (request,) = events_of(store, "polite", t.STOP_REQUESTED)
        watched = fold(events_of(store, "polite")).watched
        sid = first.producer.rpartition("/")[2]
        action = StopRun(sid=sid, id=request.id)
        resent = stop_by_agent(worker_ctx, watched, request, action, producer=first.producer, now=time.time())
        assert isinstance(resent, Awaiting) and (resent.action.sent or 0) <= time.time() < resent.due
        assert resent.action.sent is not None
        repeat = stop_by_agent(worker_ctx, watched, request, resent.action, producer=first.producer, now=time.time())
        assert isinstance(repeat, Event) and repeat.id == first.id and repeat.ts == first.ts

        # the policy's STOP of a NaN loss: SIGINT and SIGTERM ignored, then SIGKILL
        (done,) = wait_for(lambda: events_of(store, "stubborn", t.STOP_DONE), timeout=40, what="the NaN's stop.done")
        assert done.data["method"] == "SIGKILL" and done.data["by"] == "policy", done.data
        assert stubborn.wait(timeout=10) == -9

        # refused, with the reason: a run with no way to stop it, a run already stopped, an unknown run
        nohow = cli(capsys, settings_file, "stop", "nohow")
        assert nohow.returncode == 1 and "no way to stop nohow" in nohow.stderr, nohow.stderr
        again = cli(capsys, settings_file, "stop", "polite")
        assert again.returncode == 1 and "ended already" in again.stderr, again.stderr
        assert cli(capsys, settings_file, "stop", "nosuchrun").returncode == 1
        for run in ("polite", "stubborn"):  # one request, one outcome each
            assert len(events_of(store, run, t.STOP_DONE)) == 1 and not events_of(store, run, t.STOP_FAILED)
    finally:
        for proc in (polite, stubborn):
            proc.kill()
            proc.wait()
        for p in daemons:
            stop_process(p)
        for name in ("agent", "dispatcher", "worker"):
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])


def test_no_agent_on_the_host_fails_the_stop_at_once(worker_ctx, store):
    """Nothing is left waiting: without an agent's heartbeat on the run's host, the stop fails and says why."""
    watched = {"host": "gone-host", "log_path": "/data/x.log", "pid": 4242, "match": None, "session": None,
               "tmux_socket": None, "stop_command": None, "stop_grace_s": 10.0, "control": None}  # fmt: skip
    request = make_event(t.STOP_REQUESTED, run="x", host="h", producer="cli/h", seq=1,
                         data={"by": "cli", "user": "me", "reason": "lr too high"})  # fmt: skip
    sid = store.append_one(request)
    start = time.monotonic()
    action = StopRun(sid=sid, id=request.id)
    failed = stop_by_agent(worker_ctx, watched, request, action, producer=action_producer("x", sid), now=time.time())
    assert isinstance(failed, Event) and failed.type == t.STOP_FAILED
    assert "no trainwarden agent runs on gone-host" in failed.data["error"]
    assert time.monotonic() - start < 2
    silent = Heartbeat(client=store.redis, keys=store.keys, role="agent", host="gone-host", version="0",
                       interval_s=0.1)  # fmt: skip
    silent.beat()
    time.sleep(0.4)  # three intervals without a beat
    failed = stop_by_agent(worker_ctx, watched, request, action, producer=action_producer("x", sid), now=time.time())
    assert isinstance(failed, Event) and "the trainwarden agent on gone-host is not running" in failed.data["error"]
    # an agent that took the request and stays silent past the deadline: a stop.failed of the worker's own
    sent = replace(action, sent=time.time() - 50.0, due=time.time() - 1.0)
    silent_too = stop_by_agent(worker_ctx, watched, request, sent, producer=action_producer("x", sid), now=time.time())
    assert isinstance(silent_too, Event) and "did not report the stop within 49s" in silent_too.data["error"]


def test_match_finds_the_top_process_and_sigterm_ends_one_that_ignores_sigint(tmp_path):
    """The middle rung, on a process found as `--match` finds it: a shell and the python it runs count once."""
    tag = f"tag-term-{uuid.uuid4().hex[:8]}"
    script = (
        "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    )
    shell = subprocess.Popen(["bash", "-c", f"{sys.executable} -c {shlex.quote(script)} {tag}; exit 3"],
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        assert shell.stdout is not None and shell.stdout.readline() == b"up\n"
        procs = procfs.snapshot()
        (top,) = procfs.matching(tag, procs)
        assert top == shell.pid  # the python under it matches too, as the shell's descendant
        outcome = signal_ladder([procs[top]], grace_s=0.3)
        assert outcome.ok and outcome.method == "SIGTERM", outcome
        assert shell.wait(timeout=5) == -15
        assert not procfs.matching(tag, procfs.snapshot())  # the python under the shell too
        assert signal_ladder([], grace_s=0.3).text.endswith("it had ended already")
    finally:
        shell.kill()
        shell.wait()
        if shell.stdout is not None:
            shell.stdout.close()


def test_a_run_watched_as_offline_on_purpose_is_not_stopped_for_it(settings_file, store, tmp_path, capsys):
    import os

    import yaml

    body = yaml.safe_load(settings_file.read_text())
    body["agent"].update(process_interval_s=0.3, nvml=False)
    settings_file.write_text(yaml.safe_dump(body))
    offline = {**os.environ, "WANDB_MODE": "offline"}
    runs = {}
    for name in ("meant", "by-mistake"):
        log = tmp_path / f"{name}.log"
        with open(log, "ab") as sink:
            argv = [sys.executable, "-c", TRAIN, "polite", str(10**9)]
            proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=offline)
            runs[name] = (proc, log)
    daemons = [spawn(settings_file, tmp_path / f"{n}.log", n) for n in ("agent", "dispatcher", "worker")]
    try:
        wait_for(lambda: store.redis.exists(Keys().beat("agent@testhost")), timeout=30, what="the agent's heartbeat")
        for name, extra in (("meant", ["--allow-offline-wandb"]), ("by-mistake", [])):
            proc, log = runs[name]
            added = cli(capsys, settings_file, "watch", name, "--log", str(log), "--pid", str(proc.pid), *extra)
            assert added.returncode == 0, added.stderr
        stop = wait_for(lambda: [e for e in events_of(store, "by-mistake", t.DECISION) if e.data["decision"] == "STOP"],
                        timeout=30, what="the W&B rule's STOP")  # fmt: skip
        assert stop[0].data["rule"] == "wandb-offline"
        wait_for(lambda: len([e for e in events_of(store, "meant", t.HEALTH) if e.data.get("alive")]) >= 3,
                 what="the meant run's process samples")  # fmt: skip
        assert [e for e in events_of(store, "meant", t.HEALTH) if "wandb_mode" in e.data] == []
        assert [e for e in events_of(store, "meant", t.DECISION) if e.data["decision"] == "STOP"] == []
    finally:
        for proc, _ in runs.values():
            proc.kill()
            proc.wait()
        for d in daemons:
            stop_process(d)


# a loop that leaves Ctrl-C to Python: its KeyboardInterrupt traceback goes to the log as it ends
INTERRUPTED = """
import time
step = 0
while True:
    step += 1
    print(f"step={step} loss={4.2 * 0.99**step:.4f}", flush=True)
    time.sleep(0.05)
"""


def test_the_ctrl_c_traceback_of_a_policy_stop_belongs_to_the_stop_and_opens_no_anomaly(store, worker_ctx, tmp_path):
    from trainwarden.agent.control import ControlReader
    from trainwarden.agent.publisher import Publisher
    from trainwarden.agent.runner import Agent, AgentConfig
    from trainwarden.agent.watch import RunWatch
    from trainwarden.remote.agent_stop import send_stop
    from trainwarden.workers.process import process_run

    run, log = "ctrlc", tmp_path / "ctrlc.log"
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONUNBUFFERED"}
    with open(log, "ab") as sink:
        proc = subprocess.Popen([sys.executable, "-c", INTERRUPTED], stdout=sink, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)  # fmt: skip
    agent = Agent(publisher=Publisher(store), host="gpu1", state_path=tmp_path / "state.json",
                  watches=[RunWatch(run=run, log=log, pid=proc.pid, stop_grace_s=5.0)],
                  config=AgentConfig(heartbeat_interval_s=3600.0, control_interval_s=0.05),
                  control=ControlReader(store.redis, store.keys.agent_control("gpu1")))  # fmt: skip

    def driven(predicate):
        def step():
            agent.step()
            agent.flush()
            return predicate()

        return step

    try:
        wait_for(driven(lambda: len(events_of(store, run, t.METRIC)) >= 3), timeout=20, what="its steps")
        process_run(run, [])
        # the policy's STOP carried out by the run's agent, as the worker asks it: SIGINT first
        request = make_event(t.STOP_REQUESTED, run=run, host="worker-test", producer=f"eval/{run}/stop", seq=1,
                             data={"by": "policy", "reason": "loss exploded", "decision": "eval/x:1"},
                             ts=time.time())  # fmt: skip
        sid = store.append_one(request)
        send_stop(store, host="gpu1", request=request, reply_as=action_producer(run, sid))
        (done,) = wait_for(driven(lambda: events_of(store, run, t.STOP_DONE)), timeout=20, what="stop.done")
        wait_for(driven(lambda: events_of(store, run, t.RUN_FINISHED) + events_of(store, run, t.RUN_FAILED)),
                 timeout=20, what="the run's end")  # fmt: skip
    finally:
        proc.kill()
        proc.wait()
    assert done.data["method"] == "SIGINT", done.data
    assert "KeyboardInterrupt" in log.read_text()
    tracebacks = [e for e in events_of(store, run, t.LOG_LINE) if e.data.get("tag") == "traceback"]
    assert tracebacks and tracebacks[0].ts >= request.ts, [e.data for e in events_of(store, run, t.LOG_LINE)]
    process_run(run, [])
    opened = [e.data["rule"] for e in events_of(store, run, t.ANOMALY_OPENED)]
    assert "log-traceback" not in opened, opened
    assert fold(events_of(store, run)).status == "stopped"

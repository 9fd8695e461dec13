"""Process health of runs launched in real tmux: how they end, CPU/RSS, the W&B guard, real W&B."""

import os
import signal
import subprocess
import sys
import time

import pytest
from trainwarden.agent.control import ControlReader
from trainwarden.agent.publisher import Publisher
from trainwarden.agent.runner import Agent, AgentConfig
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.ops import status
from trainwarden.ops.runs import rows
from trainwarden.remote.local_launch import LaunchSpec, launch_local
from trainwarden.remote.stop import tmux_argv

from tests.helpers import events_of, wait_for
from tests.wandb_runs import SCRIPT, wandb_env

pytestmark = [pytest.mark.redis, pytest.mark.tmux]

FAST = AgentConfig(process_interval_s=0.05, heartbeat_interval_s=3600.0, control_interval_s=0.05)


def agent_for(store, tmp_path):
    return Agent(publisher=Publisher(store), host="gpu1", state_path=tmp_path / "state.json", config=FAST,
                 control=ControlReader(store.redis, store.keys.agent_control("gpu1")))  # fmt: skip


def launch(store, tmp_path, tmux_socket, *command, env=None, wandb=None):
    spec = LaunchSpec(run="exp01", command=command, workdir=tmp_path, log_path=tmp_path / "train.log",
                      tmux_socket=tmux_socket, env=env or {}, wandb=wandb)  # fmt: skip
    return launch_local(spec, store=store, host="gpu1")


def drive(agent, predicate, *, timeout=20.0, what=""):
    def step():
        agent.step()
        agent.flush()
        return predicate()

    return wait_for(step, timeout=timeout, what=what)


def test_a_failing_run_ends_with_its_exit_code_and_log_tail(store, tmp_path, tmux_socket):
    script = "import sys; print('step=1 loss=2.0'); print('ValueError: bad config'); sys.exit(3)"
    launched = launch(store, tmp_path, tmux_socket, sys.executable, "-c", script)
    agent = agent_for(store, tmp_path)
    (ended,) = drive(agent, lambda: events_of(store, "exp01", t.RUN_FAILED), what="run.failed")
    assert ended.data["exit_code"] == 3
    assert ended.data["log_tail"][-1] == "ValueError: bad config"
    assert ended.id == f"exit/exp01:{launched.seq}"  # the id the central liveness check also uses
    types = [e.type for e in events_of(store, "exp01")]
    assert types.index(t.METRIC) < types.index(t.RUN_FAILED)  # the log's lines come before the end


def test_a_run_that_exits_0_is_finished_once(store, tmp_path, tmux_socket):
    launch(store, tmp_path, tmux_socket, sys.executable, "-c", "print('step=1 loss=1.0')")
    agent = agent_for(store, tmp_path)
    drive(agent, lambda: events_of(store, "exp01", t.RUN_FINISHED), what="run.finished")
    agent_for(store, tmp_path).run(burst=True)  # a restarted agent sees the same exit file
    (finished,) = events_of(store, "exp01", t.RUN_FINISHED)
    assert finished.data["exit_code"] == 0 and "log_tail" not in finished.data
    # the end is told once, by run.finished: no "alive: false" health sample that a policy would call a death
    assert all(e.data.get("alive") is not False for e in events_of(store, "exp01", t.HEALTH))


def test_wandb_guard_health_and_a_killed_session(store, tmp_path, tmux_socket):
    # half a second of work first: the trainer is then the run's busiest process, whose sleep the sample names
    script = "import time; sum(range(3 * 10**7)); print('step=1 loss=1.0', flush=True); time.sleep(120)"
    launch(store, tmp_path, tmux_socket, sys.executable, "-c", script, env={"WANDB_MODE": "offline"})
    agent = agent_for(store, tmp_path)
    guard = drive(agent, lambda: [e for e in events_of(store, "exp01", t.HEALTH) if e.data.get("check")],
                  what="the W&B guard")  # fmt: skip
    assert guard[0].data["wandb_mode"] == "offline" and guard[0].data["ok"] is False
    # WANDB_MODE in its environment: it uses W&B, and none is found; said once, without a `log` first
    statuses = drive(agent, lambda: [e.data for e in events_of(store, "exp01", t.SOURCE_STATUS)
                                     if e.data["source"] == "metrics"], what="the metrics source")  # fmt: skip
    assert [d["status"] for d in statuses] == ["log_fallback"]
    assert "WANDB_MODE=" not in str(statuses)  # names of variables only, never their values
    samples = drive(agent, lambda: [e for e in events_of(store, "exp01", t.HEALTH) if "cpu_pct" in e.data],
                    what="a health sample with CPU%")  # fmt: skip
    assert samples[-1].data["alive"] is True and samples[-1].data["processes"] >= 2
    asleep = drive(agent, lambda: [e for e in events_of(store, "exp01", t.HEALTH) if "waiting" in e.data],
                   what="a health sample saying where the run waits")  # fmt: skip
    assert asleep[-1].data["waiting"] == "hrtimer_nanosleep", [e.data for e in asleep]  # busiest: time.sleep
    # kill -9 of the wrapper (the pane's process) leaves no exit file; a killed session is recorded as
    # exit code 129 by the wrapper (tests/integration/test_launch_stop.py)
    pane = subprocess.run(tmux_argv(tmux_socket, "list-panes", "-t", "=train-exp01", "-F", "#{pane_pid}"),
                          capture_output=True, text=True, check=True).stdout.split()[0]  # fmt: skip
    os.kill(int(pane), signal.SIGKILL)
    (failed,) = drive(agent, lambda: events_of(store, "exp01", t.RUN_FAILED), what="run.failed")
    assert failed.data["exit_code"] is None
    assert failed.data["reason"] == "the process is gone and left no exit code"
    assert all(e.data.get("alive") is not False for e in events_of(store, "exp01", t.HEALTH))


def test_a_run_launched_with_no_wandb_gets_neither_the_guard_nor_a_fallback(store, tmp_path, tmux_socket):
    script = "import time; print('step=1 loss=1.0', flush=True); time.sleep(120)"
    launched = launch(store, tmp_path, tmux_socket, sys.executable, "-c", script, env={"WANDB_MODE": "disabled"},
                      wandb=False)  # fmt: skip
    assert launched.data["uses_wandb"] is False
    agent = agent_for(store, tmp_path)
    drive(agent, lambda: [e for e in events_of(store, "exp01", t.HEALTH) if "cpu_pct" in e.data],
          what="two health samples (its environment read twice)")  # fmt: skip
    statuses = [e.data for e in events_of(store, "exp01", t.SOURCE_STATUS) if e.data["source"] == "metrics"]
    assert [d["status"] for d in statuses] == ["log"] and "turned off" in statuses[0]["reason"]
    assert not [e for e in events_of(store, "exp01", t.HEALTH) if e.data.get("check") == "wandb_mode"]


def test_a_real_wandb_run_in_tmux_is_read_from_its_run_files(store, tmp_path, tmux_socket):
    env = {k: v for k, v in wandb_env(tmp_path).items() if k.startswith("WANDB_")}
    rows = '[{"train/loss": 2.5, "train/global_step": 1}, {"train/loss": 2.25, "train/global_step": 2}]'
    launch(store, tmp_path, tmux_socket, sys.executable, "-c", SCRIPT, rows, "exp01", env=env)
    agent = agent_for(store, tmp_path)
    drive(agent, lambda: events_of(store, "exp01", t.RUN_FINISHED), timeout=60, what="run.finished")
    drive(agent, lambda: len(events_of(store, "exp01", t.METRIC)) == 2, what="both W&B rows")
    metrics = events_of(store, "exp01", t.METRIC)
    assert [(e.data["step"], e.data["loss"]) for e in metrics] == [(1, 2.5), (2, 2.25)]
    assert all("/wandb/exp01/offline-run-" in e.producer for e in metrics)
    assert "wandb_ok" in [e.data["status"] for e in events_of(store, "exp01", t.SOURCE_STATUS)]


# a step, then (told to go) a segfault; its last line says when, by the clock the agent's events use
SEGFAULT = """
import os, signal, sys, time
print("step=1 loss=2.0", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
print(f"crashing at {time.time():.3f}", flush=True)
os.kill(os.getpid(), signal.SIGSEGV)
"""


def test_a_segfault_is_recorded_within_a_poll_not_at_the_next_process_sample(store, tmp_path, tmux_socket):
    """Process samples at the default 10 s: the death shows on the fast path (the exit file, the pid gone)."""
    from trainwarden.events.projection import fold
    from trainwarden.workers.report import check_facts, render_report

    go = tmp_path / "go"
    launch(store, tmp_path, tmux_socket, "env", "-u", "PYTHONUNBUFFERED", sys.executable, "-c", SEGFAULT, str(go))
    agent = Agent(publisher=Publisher(store), host="gpu1", state_path=tmp_path / "state.json",
                  config=AgentConfig(heartbeat_interval_s=3600.0, control_interval_s=0.05),
                  control=ControlReader(store.redis, store.keys.agent_control("gpu1")))  # fmt: skip
    drive(agent, lambda: [e for e in events_of(store, "exp01", t.HEALTH) if e.data.get("alive")],
          what="the run seen alive")  # fmt: skip
    drive(agent, lambda: events_of(store, "exp01", t.METRIC), what="its step")
    go.touch()
    (failed,) = drive(agent, lambda: events_of(store, "exp01", t.RUN_FAILED), timeout=3.0, what="run.failed")
    crashed = float((tmp_path / "train.log").read_text().split("crashing at ")[1].split()[0])
    print(f"run.failed recorded {failed.ts - crashed:.3f}s after the segfault")
    assert failed.data["exit_code"] == 139  # 128 + SIGSEGV, by the wrapper
    facts = check_facts(fold(events_of(store, "exp01")), now=time.time(), interval_s=60, stale_s=60, files_inspected=[])
    report = render_report(facts)
    assert facts["status"] == "failed" and "- Run: exp01 on gpu1 (failed, step 1)" in report, report
    assert "- Reason: failed at step 1 (exit 139)" in report and "CONTINUE" not in report, report


def test_an_ended_run_gets_no_heartbeat_and_its_last_event_stays_its_end(store, tmp_path, tmux_socket):
    done = tmp_path / "done"
    script = (f"import os, time; print('step=1 loss=1.0', flush=True); "
              f"[time.sleep(0.02) for _ in iter(lambda: os.path.exists({str(done)!r}), True)]")  # fmt: skip
    launch(store, tmp_path, tmux_socket, sys.executable, "-c", script)
    ahead = [0.0]  # the agent's clock runs this far ahead of the wall clock: minutes pass at once
    agent = Agent(publisher=Publisher(store), host="gpu1", state_path=tmp_path / "state.json",
                  config=AgentConfig(process_interval_s=0.05, heartbeat_interval_s=30.0, control_interval_s=0.05),
                  control=ControlReader(store.redis, store.keys.agent_control("gpu1")),
                  clock=lambda: time.time() + ahead[0])  # fmt: skip
    drive(agent, lambda: events_of(store, "exp01", t.AGENT_HEARTBEAT), what="a heartbeat while the run runs")
    done.touch()
    (finished,) = drive(agent, lambda: events_of(store, "exp01", t.RUN_FINISHED), what="run.finished")
    for _ in range(9):  # 4.5 minutes of the agent's heartbeat interval, under the 5 it keeps an ended run watched
        ahead[0] += 30.0
        agent.step()
        agent.flush()
    assert [b.ts for b in events_of(store, "exp01", t.AGENT_HEARTBEAT) if b.ts > finished.ts] == []
    # a /tw status about it, as the bot's audit records it: the run's log, not its activity
    asked = finished.ts + 270.0
    store.append([make_event(t.COMMAND_RECEIVED, run="exp01", host="bot", producer="bot/audit", seq=1, ts=asked,
                             data={"user": "U1", "command": "status", "text": "exp01"})])  # fmt: skip
    (row,) = [r for r in rows(store) if r.run == "exp01"]
    assert (row.status, row.last_ts) == ("finished", finished.ts)  # `trainwarden runs`' LAST EVENT, MCP's `runs`
    assert status.detail(store, "exp01", now=asked).splitlines()[1].endswith(" last 4m30s ago")  # /tw status, MCP

"""The sidecar metrics file: written by real training processes with `trainwarden.log`, followed by the agent.

Exact names and steps beat scraped ones: once the sidecar has a line, the log's metric lines are not
published (its notable lines are), and each sidecar line is one event, whatever restarts happen.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from trainwarden.agent.publisher import Publisher
from trainwarden.agent.runner import Agent
from trainwarden.agent.watch import RunWatch
from trainwarden.core.sidecar import metrics_path
from trainwarden.events import types as t
from trainwarden.events.store import EventStore
from trainwarden.remote.local_launch import LaunchSpec, launch_local

from tests.conftest import spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = pytest.mark.redis

# A custom training loop: each step is written to the sidecar, then printed as trainers print it.
TRAIN = textwrap.dedent("""
    import sys, time
    import trainwarden
    if len(sys.argv) > 1:
        trainwarden.init(path=sys.argv[1])
    for step in range(20):
        loss = float("nan") if step == 17 else 2.0 - step / 10
        trainwarden.log(step=step, loss=loss, learning_rate=3e-4, eval_loss=2.5 - step / 20)
        print(f"step={step} loss={loss:.4f} lr=3e-4", flush=True)
        time.sleep(0.01)
""")


def fast_settings(settings_file: Path) -> Path:
    body = yaml.safe_load(settings_file.read_text())
    body["agent"]["process_interval_s"] = 0.2  # run.finished soon after the run exits
    settings_file.write_text(yaml.safe_dump(body))
    return settings_file


def check_sidecar_metrics(store: EventStore, run: str) -> None:
    metrics = events_of(store, run, t.METRIC)
    assert [e.data["step"] for e in metrics] == list(range(20))  # each line once, none from the log
    assert {e.producer for e in metrics} == {f"testhost/sidecar/{run}/g0"}
    assert metrics[3].data == {"step": 3, "loss": 1.7, "lr": 3e-4, "val_loss": 2.35}  # names normalised, exact
    assert math.isnan(metrics[17].data["loss"])
    statuses = [e.data["status"] for e in events_of(store, run, t.SOURCE_STATUS) if e.data["source"] == "metrics"]
    assert statuses[-1] == "sidecar"


@pytest.mark.tmux
def test_a_launched_run_writes_its_sidecar_and_the_agent_publishes_each_line_once(
    store: EventStore, settings_file: Path, tmp_path: Path, tmux_socket: str
) -> None:
    settings = fast_settings(settings_file)
    agent = spawn(settings, tmp_path / "agent.log", "agent")  # learns of the run from the launch
    log = tmp_path / "exp01.log"
    try:
        spec = LaunchSpec(run="exp01", command=(sys.executable, "-c", TRAIN), workdir=tmp_path, log_path=log,
                          tmux_socket=tmux_socket)  # fmt: skip
        launch_local(spec, store=store, host="testhost")
        wait_for(lambda: events_of(store, "exp01", t.RUN_FINISHED), timeout=30, what="run.finished")
    finally:
        stop_process(agent)
        print((tmp_path / "agent.log").read_text(errors="replace")[-3000:])
    assert Path(metrics_path(str(log))).read_text().count("\n") == 20  # where the launch told it to write
    check_sidecar_metrics(store, "exp01")
    (entry,) = store.redis.xrange(store.keys.agent_control("testhost"))
    assert entry[1][b"metrics"] == metrics_path(str(log)).encode()


def test_a_watched_run_with_an_explicit_path_beside_its_log(
    store: EventStore, settings_file: Path, tmp_path: Path
) -> None:
    log = tmp_path / "train.log"
    sidecar = metrics_path(str(log))
    with open(log, "wb") as out:  # no TRAINWARDEN_METRICS: the script names its file
        done = subprocess.run([sys.executable, "-c", TRAIN, sidecar], stdout=out, timeout=60, check=False,
                              env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0
    agent = spawn(settings_file, tmp_path / "agent.log", "agent", "--watch", f"exp02={log}")
    try:
        wait_for(lambda: len(events_of(store, "exp02", t.METRIC)) >= 20, timeout=30, what="20 metric events")
        wait_for(lambda: events_of(store, "exp02", t.AGENT_HEARTBEAT), timeout=30, what="a heartbeat")
    finally:
        stop_process(agent)
    check_sidecar_metrics(store, "exp02")
    beat = events_of(store, "exp02", t.AGENT_HEARTBEAT)[-1]
    assert beat.data["sources"]["sidecar"] == sidecar and beat.data["sources"]["metrics"] == "sidecar"


def make_agent(store: EventStore, log: Path, state: Path) -> Agent:
    return Agent(publisher=Publisher(store), host="gpu1", watches=[RunWatch(run="exp01", log=log)], state_path=state)


def test_console_metrics_count_until_the_sidecar_starts_and_a_restart_adds_no_duplicates(
    store: EventStore, tmp_path: Path
) -> None:
    log, state = tmp_path / "train.log", tmp_path / "state.json"
    sidecar = Path(metrics_path(str(log)))
    # Console lines: tests/data/real/hf_dict_modernbert_gradnorm_nan_loss_zero.log lines 1-2 and
    # tests/data/real/llamafactory_oom_in_backward.log line 13; the sidecar holds what the HF callback
    # writes for the second one (the Trainer's `logs` dict and its global step).
    log.write_text("{'loss': 0.2051, 'grad_norm': nan, 'learning_rate': 9.774074342405685e-06, 'epoch': 0.53}\n")
    make_agent(store, log, state).run(burst=True)  # no sidecar yet: the console is the source
    with open(log, "a") as f:
        f.write("{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 9.773696745450087e-06, 'epoch': 0.53}\n"
                "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 112.00 MiB. GPU\n")  # fmt: skip
    sidecar.write_text(
        '{"step": 1060, "loss": 0.0, "grad_norm": NaN, "learning_rate": 9.773696745450087e-06, "epoch": 0.53}\n'
    )
    make_agent(store, log, state).run(burst=True)
    with open(sidecar, "a") as f:
        f.write('{"step": 1070, "loss": Infinity}\nnot json\n{"step": -1, "loss": 2.0}\n')
    make_agent(store, log, state).run(burst=True)
    state.unlink()  # lost its offsets: everything is read again, and the store drops the repeats
    make_agent(store, log, state).run(burst=True)
    metrics = events_of(store, "exp01", t.METRIC)
    assert [(e.producer.split("/")[1], e.data.get("step")) for e in metrics] == [
        ("log", 1), ("sidecar", 1060), ("sidecar", 1070), ("sidecar", None)  # step -1 refused, its loss kept
    ]  # fmt: skip
    assert metrics[0].data["loss"] == 0.2051
    assert {k: v for k, v in metrics[1].data.items() if k != "grad_norm"} == {
        "step": 1060, "loss": 0.0, "lr": 9.773696745450087e-06, "epoch": 0.53}  # fmt: skip
    assert math.isnan(metrics[1].data["grad_norm"]) and metrics[2].data["loss"] == math.inf
    (oom,) = events_of(store, "exp01", t.LOG_LINE)
    assert oom.data["tag"] == "oom"  # notable lines still come from the log

"""The W&B rule while a run trains, end to end: launched over SSH, watched by the real agent, judged by the
real dispatcher and worker with the default policy. A run whose script exports WANDB_MODE=offline is
STOPped once a person confirms; one whose experiment sets allow_offline_wandb trains to its end; a run too
short for its environment to be read is still known to use W&B, from its launch record."""

import os
import subprocess

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event, time_seq

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for
from tests.remote.conftest import write_servers_file

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.ssh, pytest.mark.slow]

KEY = {"WANDB_API_KEY": "good-key-0123456789"}
OFFLINE_SCRIPT = "export WANDB_MODE=offline\npython train.py\n"  # the guard at launch cannot see inside a script


def settings_for(settings_file, gpu_server, tmp_path, *, process_interval_s: float):
    """The agent runs as the server's host (gpu1): the launch registers runs on gpu1's control stream."""
    servers = write_servers_file(gpu_server, tmp_path / "servers.yaml")
    (gpu_server.code / "offline.sh").write_text(OFFLINE_SCRIPT)
    exps = tmp_path / "experiments"
    exps.mkdir()
    common = {"server": "gpu1", "wandb": {"project": "proj"}, "stop_grace_s": 2, "gpus": 0}
    for name, extra in {
        "off": {"script": "offline.sh", "env": {"STEP_S": "0.1"}},
        "offok": {"script": "offline.sh", "allow_offline_wandb": True, "env": {"FINISH_AT": "40", "STEP_S": "0.1"}},
        "short": {"command": "python train.py", "env": {"FINISH_AT": "2", "STEP_S": "0.01"}},
    }.items():
        (exps / f"exp-{name}.yaml").write_text(yaml.safe_dump({"name": name, **common, **extra}))
    body = yaml.safe_load(settings_file.read_text())
    body.update(servers_file=str(servers), experiments_dir=str(exps), host="gpu1")
    body["agent"].update(nvml=False, process_interval_s=process_interval_s)
    settings_file.write_text(yaml.safe_dump(body))
    return settings_file


def launch(settings, name):
    out = subprocess.run(cli_argv(settings, "launch", name), capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={**os.environ, **KEY}, check=False)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture
def daemons(tmp_path):
    procs = []

    def start(settings, *roles):
        procs.extend(spawn(settings, tmp_path / f"{role}.log", role) for role in roles)

    yield start
    for proc in procs:
        stop_process(proc)


def decisions(store, run, decision):
    return [e for e in events_of(store, run, t.DECISION) if e.data["decision"] == decision]


def test_an_offline_run_is_stopped_after_confirmation_and_an_allowed_one_is_not(
    settings_file, gpu_server, tmp_path, store, daemons
):
    settings = settings_for(settings_file, gpu_server, tmp_path, process_interval_s=0.5)
    daemons(settings, "agent", "dispatcher", "worker")
    launch(settings, "off")
    launch(settings, "offok")

    (stop,) = wait_for(lambda: decisions(store, "off", t.STOP), timeout=60, what="the default policy's STOP")
    assert stop.data["rule"] == "wandb-offline" and stop.data["confirm_s"] == 600
    assert "WANDB_MODE=offline" in stop.data["reason"]
    assert events_of(store, "off", t.STOP_REQUESTED) == []  # waiting for a person
    asked = {"by": "slack", "user": "U1", "reason": "Stop now: wandb-offline", "decision": stop.id,
             "rule": "wandb-offline"}  # fmt: skip
    store.append_one(make_event(t.STOP_REQUESTED, run="off", host="bot", producer="slack/test", seq=time_seq(),
                                data=asked))  # fmt: skip
    wait_for(lambda: events_of(store, "off", t.STOP_DONE), timeout=60, what="the offline run stopped")

    wait_for(lambda: events_of(store, "offok", t.RUN_FINISHED), timeout=60, what="the allowed run's end")
    (launched,) = events_of(store, "offok", t.RUN_LAUNCHED)
    assert launched.data["allow_offline_wandb"] is True
    assert [e for e in events_of(store, "offok", t.HEALTH) if e.data.get("alive")]  # its processes were sampled
    assert [e for e in events_of(store, "offok", t.HEALTH) if "wandb_mode" in e.data] == []
    opened = [e.data for e in events_of(store, "offok", t.ANOMALY_OPENED)]
    assert [d["rule"] for d in opened if d["severity"] != "info"] == []  # wandb-not-connected (info): no W&B files
    assert decisions(store, "offok", t.STOP) == []


def test_a_short_runs_wandb_use_comes_from_its_launch(settings_file, gpu_server, tmp_path, store, daemons):
    # a run over before the agent's first process sample: its WANDB_PROJECT was never seen, and the agent said
    # "this run does not use W&B" (source `log`) though its launch exports WANDB_PROJECT
    settings = settings_for(settings_file, gpu_server, tmp_path, process_interval_s=5)
    daemons(settings, "agent")
    launch(settings, "short")
    wait_for(lambda: events_of(store, "short", t.RUN_FINISHED), timeout=60, what="the short run's end")
    said = wait_for(lambda: [e.data for e in events_of(store, "short", t.SOURCE_STATUS)
                             if e.data.get("source") == "metrics"], what="where its metrics come from")  # fmt: skip
    assert [d["status"] for d in said] == ["log_fallback"], said
    assert "it uses W&B" in said[0]["reason"]
    (launched,) = events_of(store, "short", t.RUN_LAUNCHED)
    assert launched.data["uses_wandb"] is True

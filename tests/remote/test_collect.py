"""`collect` on the logs real runs left: plans over a real sshd into real tmux, events in a real Redis."""

import socket

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event, time_seq
from trainwarden.remote.collect import collect
from trainwarden.remote.collect_facts import BestBy, iso
from trainwarden.remote.final_metrics import WandbApi
from trainwarden.remote.fleet import Fleet, WandbConfig
from trainwarden.remote.launch import RemoteLauncher
from trainwarden.remote.plan import Plan
from trainwarden.remote.planner import PlanRunner

from tests.helpers import events_of
from tests.remote.conftest import experiment
from tests.wandb_runs import wandb_env, write_offline_run
from trainwarden.wandb_files import WandbRunFiles

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.ssh, pytest.mark.slow]

FAST = {"FINISH_AT": "3", "STEP_S": "0.05"}


def runner(pool, store, gpu_server, key="good-key-0123456789", **e1):
    exps = [
        experiment("e1", env=FAST, **e1),
        experiment("e2", env={**FAST, "FAIL_AT": "2"}),
        experiment("e3", env=FAST),
    ]
    fleet = Fleet(servers={"gpu1": gpu_server.server}, experiments={e.name: e for e in exps})
    launcher = RemoteLauncher(shell=pool, store=store, fleet=fleet, host="ctl", secrets={"WANDB_API_KEY": key})
    return PlanRunner(store=store, launcher=launcher, shell=pool, fleet=fleet, host="ctl", poll_s=0.1), launcher


def note(store, run, event_type, **data):
    event = make_event(event_type, run=run, host="ctl", producer="test", seq=time_seq(), data=data)
    store.append_one(event)
    return event


def load(out):
    doc = yaml.safe_load((out / "training" / "runs.yaml").read_text())
    return doc["runs"], doc["refused"], yaml.safe_load((out / "status.yaml").read_text())["training_status"]


def test_collect_reports_each_launch_refusals_apart_and_never_the_system_stream(pool, store, gpu_server, tmp_path):
    plans, _ = runner(pool, store, gpu_server)
    assert plans.run(Plan(name="p1", experiments=("e1",))).finished
    assert plans.run(Plan(name="p2", experiments=("e1", "e2"))).finished  # e1 again, then e2 fails (exit 3)
    note(store, "e2", t.DECISION, decision=t.CONTINUE, rule=None, reason="healthy", trigger="x", policy="h")
    _, refusing = runner(pool, store, gpu_server, key="bad-key")
    with pytest.raises(Exception, match="preflight failed"):
        refusing.launch("e3")
    note(store, t.SYSTEM_RUN, t.POLICY_LOADED, policy="h", name="default", source="builtin", rules=1, text=None)

    out = tmp_path / "proj"
    collect(store, out=out)
    runs, refused, status = load(out)

    launches = events_of(store, "e1", t.RUN_LAUNCHED)
    e1 = [r for r in runs if r["run"] == "e1"]
    assert [(r["plan"], r["launch"], r["status"]) for r in e1] == [("p1", 1, "finished"), ("p2", 2, "finished")]
    assert [r["launched_at"] for r in e1] == [iso(e.ts) for e in launches]  # the launch, not the preflight
    first = events_of(store, "e1")[0]
    assert first.type == t.PREFLIGHT and iso(first.ts) != e1[0]["launched_at"]
    (e2,) = [r for r in runs if r["run"] == "e2"]
    assert e2["status"] == "failed" and e2["decision"] == "none" and e2["failure"].startswith("exit code 3")
    assert {r["run"] for r in runs} == {"e1", "e2"}  # neither the system stream, nor the refused e3
    assert [(r["run"], r["check"]) for r in refused] == [("e3", "wandb_login")]
    assert "API key not configured" in refused[0]["reason"] and "fix:" in refused[0]["reason"]
    assert status["runs"] == {"e1": "finished", "e2": "failed"} and status["overall"] == "failed"
    assert status["refused"] == ["e3"]

    findings = (out / "findings.md").read_text()
    assert findings.count("## e1 (launch") == 2 and findings.count("## e2 (launch 1, attempt 1): failed") == 1
    assert "exit code 3" in findings
    collect(store, out=out)
    assert (out / "findings.md").read_text() == findings  # a second collect adds nothing


def test_collect_lists_saved_kept_and_best_checkpoints(pool, store, gpu_server, tmp_path):
    plans, _ = runner(pool, store, gpu_server)
    assert plans.run(Plan(name="p1", experiments=("e1",))).finished
    for epoch, loss in ((1, 2.0), (2, 1.5), (3, 1.7)):
        note(store, "e1", t.CHECKPOINT_SAVED, path=f"/ckpt/epoch_{epoch}.pt", metric=loss)
    note(store, "e1", t.CHECKPOINT_DELETED, path="/ckpt/epoch_1.pt", server="gpu1", reason="retention")

    out = tmp_path / "proj"
    collect(store, out=out, best_by={"e1": BestBy("val_loss", "min")})
    ckpts = yaml.safe_load((out / "training" / "checkpoints.yaml").read_text())["checkpoints"]["e1"]
    assert [s["path"] for s in ckpts["saved"]] == ["/ckpt/epoch_1.pt", "/ckpt/epoch_2.pt", "/ckpt/epoch_3.pt"]
    assert ckpts["kept"] == ["/ckpt/epoch_2.pt", "/ckpt/epoch_3.pt"]
    assert ckpts["best"] == "/ckpt/epoch_2.pt" and ckpts["best_by"] == "min val_loss = 1.5"
    assert ckpts["deleted"] == [{"path": "/ckpt/epoch_1.pt", "reason": "retention"}]
    (entry,) = load(out)[0]
    assert entry["checkpoints"]["best"] == "/ckpt/epoch_2.pt" and len(entry["checkpoints"]["saved"]) == 3

    collect(store, out=out, best_by={"e1": BestBy("acc", "max")})
    ckpts = yaml.safe_load((out / "training" / "checkpoints.yaml").read_text())["checkpoints"]["e1"]
    assert ckpts["best"] == "/ckpt/epoch_3.pt"  # max among the kept ones


def test_final_metrics_from_the_runs_own_wandb_files(pool, store, gpu_server, tmp_path):
    """The reachable path through the FinalMetrics interface: what a real (offline) wandb wrote."""
    rows = [{"train/loss": 2.0 - i / 10, "acc": 0.5 + i / 100} for i in range(5)]
    root = write_offline_run(tmp_path / "wb", rows, name="exp01")
    plans, _ = runner(pool, store, gpu_server, wandb=WandbConfig(project="tw-test", run_name="exp01"))
    assert plans.run(Plan(name="p1", experiments=("e1",))).finished
    out = tmp_path / "proj"
    collect(store, out=out, metrics=WandbRunFiles(root.parent.parent))
    (entry,) = load(out)[0]
    assert entry["metrics_source"] == "wandb" and entry["wandb_pull"] == "ok"
    assert entry["final_metrics"] == {"train/loss": rows[-1]["train/loss"], "acc": rows[-1]["acc"]}


def test_wandb_unreachable_is_said_and_the_logs_metrics_kept(pool, store, gpu_server, tmp_path, monkeypatch):
    for name, value in wandb_env(tmp_path / "wb").items():
        if name.startswith("WANDB_") and name != "WANDB_MODE":
            monkeypatch.setenv(name, value)
    with socket.socket() as s:  # a port on 127.0.0.1 that nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    plans, _ = runner(pool, store, gpu_server)
    assert plans.run(Plan(name="p1", experiments=("e1",))).finished
    out = tmp_path / "proj"
    api = WandbApi(api_key="k" * 40, base_url=f"http://127.0.0.1:{closed}", timeout_s=2)
    collect(store, out=out, metrics=api)
    (entry,) = load(out)[0]
    assert entry["metrics_source"] == "log"
    assert entry["wandb_pull"].startswith("unreachable (needs network and WANDB_API_KEY): ")
    assert f"127.0.0.1:{closed}" in entry["wandb_pull"]
    collect(store, out=out, metrics=WandbApi(api_key=None))
    (entry,) = load(out)[0]
    assert entry["wandb_pull"] == "unreachable (needs network and WANDB_API_KEY): WANDB_API_KEY is not set"

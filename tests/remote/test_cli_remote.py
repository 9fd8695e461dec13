"""The remote commands through the real CLI: config check, preflight, launch, stop, retention, plans, collect."""

import json
import os
import socket
import subprocess
import sys

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for
from tests.remote.conftest import write_servers_file

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.ssh, pytest.mark.slow]

KEY = {"WANDB_API_KEY": "good-key-0123456789"}


@pytest.fixture
def remote_settings(settings_file, gpu_server, tmp_path):
    servers = write_servers_file(gpu_server, tmp_path / "servers.yaml")
    exps = tmp_path / "experiments"
    exps.mkdir()
    common = {"server": "gpu1", "command": "python train.py", "wandb": {"project": "proj"}, "stop_grace_s": 2,
              "env": {"FINISH_AT": "5", "STEP_S": "0.05"}}  # fmt: skip
    (exps / "exp-a.yaml").write_text(yaml.safe_dump({"name": "a", **common, "checkpoints": {
        "dir": str(gpu_server.code / "ckpt"), "best_metric": "val_loss", "milestones": [2]}}))  # fmt: skip
    (exps / "exp-b.yaml").write_text(yaml.safe_dump({"name": "b", **common, "depends_on": ["a"]}))
    (exps / "exp-long.yaml").write_text(yaml.safe_dump({"name": "long", **common, "env": {}}))
    body = yaml.safe_load(settings_file.read_text())
    body.update(servers_file=str(servers), experiments_dir=str(exps))
    settings_file.write_text(yaml.safe_dump(body))
    return settings_file


def cli(settings, *args, env=None):
    return subprocess.run(cli_argv(settings, *args), capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, **(env or {})}, check=False)  # fmt: skip


def test_config_check(remote_settings, tmp_path):
    out = cli(remote_settings, "config", "check")
    assert out.returncode == 0, out.stderr
    assert "1 ok (gpu1)" in out.stdout and "3 ok (a, b, long)" in out.stdout
    (tmp_path / "experiments" / "exp-bad.yaml").write_text("name: bad\nserver: nowhere\ncommand: x\n")
    bad = cli(remote_settings, "config", "check")
    assert bad.returncode == 1
    assert "exp-bad.yaml:2:9: unknown server 'nowhere'" in bad.stderr


def test_preflight_command(remote_settings, gpu_server):
    ok = cli(remote_settings, "preflight", "a", env=KEY)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "preflight passed for a on gpu1 GPUs [0]" in ok.stdout
    gpu_server.set_busy("GPU-aaaa, 999, python")
    busy = cli(remote_settings, "preflight", "a", env=KEY)
    assert busy.returncode == 1
    assert "FAIL gpus_free" in busy.stdout and "fix: pick free GPUs" in busy.stdout


def test_preflight_and_launch_are_quiet_at_the_default_log_level(remote_settings, gpu_server):
    # asyncssh logged each connection, channel and command at INFO: ~25 lines a preflight, a launch's shell
    def default_level(*args, level=()):
        argv = [sys.executable, "-m", "trainwarden", "--config", str(remote_settings), *level, *args]
        return subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=120,
                              env={**os.environ, **KEY}, check=False)  # fmt: skip

    checked = default_level("preflight", "a")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stderr == ""
    assert len(checked.stdout.splitlines()) == 8  # 7 checks and the verdict
    launched = default_level("launch", "a")
    assert launched.returncode == 0, launched.stdout + launched.stderr
    # "launched ...", "log: ...", or one line when the command ends within the first seconds (a finishes at once)
    assert launched.stderr == "" and 1 <= len(launched.stdout.splitlines()) <= 2, launched.stdout
    debug = default_level("preflight", "a", level=("--log-level", "DEBUG"))
    assert "asyncssh" in debug.stderr  # still there when asked for


def test_launch_then_stop_through_the_workers(remote_settings, store, tmp_path):
    out = cli(remote_settings, "launch", "long", env=KEY)
    assert out.returncode == 0, out.stderr
    assert "launched long on gpu1 GPUs [0]" in out.stdout
    worker = spawn(remote_settings, tmp_path / "worker.log", "worker")
    dispatcher = spawn(remote_settings, tmp_path / "dispatcher.log", "dispatcher")
    try:
        assert cli(remote_settings, "stop", "long", "--reason", "enough").returncode == 0
        (done,) = wait_for(lambda: events_of(store, "long", t.STOP_DONE), timeout=30, what="stop.done")
        assert done.data["method"] == "ctrl-c"
    finally:
        stop_process(worker)
        stop_process(dispatcher)


def test_checkpoint_retention_dry_run_then_apply(remote_settings, store, gpu_server):
    ckpt = gpu_server.code / "ckpt"
    ckpt.mkdir()
    for i, loss in enumerate([3.0, 2.0, 2.5, 2.8], start=1):
        (ckpt / f"epoch_{i}_val_loss={loss}.pt").write_text("w" * 10)
        os.utime(ckpt / f"epoch_{i}_val_loss={loss}.pt", (i, i))
    (ckpt / "notes.txt").write_text("not a checkpoint")
    dry = cli(remote_settings, "checkpoints", "a")
    assert dry.returncode == 0, dry.stderr
    assert "keep    epoch_2_val_loss=2.0.pt  (best val_loss=2.0; milestone epoch 2)" in dry.stdout
    assert "keep    epoch_4_val_loss=2.8.pt  (latest)" in dry.stdout
    assert "delete  epoch_1_val_loss=3.0.pt" in dry.stdout and "dry run: 2 checkpoint(s)" in dry.stdout
    assert len(list(ckpt.iterdir())) == 5  # nothing deleted
    applied = cli(remote_settings, "checkpoints", "a", "--apply")
    assert applied.returncode == 0, applied.stderr
    assert sorted(p.name for p in ckpt.iterdir()) == ["epoch_2_val_loss=2.0.pt", "epoch_4_val_loss=2.8.pt", "notes.txt"]
    deleted = events_of(store, "a", t.CHECKPOINT_DELETED)
    assert sorted(e.data["path"].rsplit("/", 1)[1] for e in deleted) == ["epoch_1_val_loss=3.0.pt",
                                                                          "epoch_3_val_loss=2.5.pt"]  # fmt: skip


def test_retention_over_ssh_never_deletes_best_pt_nor_latest_pt(remote_settings, store, gpu_server):
    # the procedure's layout: numbered epochs beside best.pt and latest.pt, no metric in any name (the dry run
    # listed `delete best.pt` and `delete latest.pt`, and --apply deleted them)
    ckpt = gpu_server.code / "ckpt"
    ckpt.mkdir()
    names = [*(f"epoch_{i}.pt" for i in range(1, 6)), "best.pt", "latest.pt"]
    for i, name in enumerate(names, start=1):
        (ckpt / name).write_text("w" * 10)
        os.utime(ckpt / name, (i, i))
    applied = cli(remote_settings, "checkpoints", "a", "--apply")
    assert applied.returncode == 0, applied.stderr
    assert "keep    best.pt  (named best, latest or last: never deleted)" in applied.stdout
    assert sorted(p.name for p in ckpt.iterdir()) == ["best.pt", "epoch_2.pt", "epoch_5.pt", "latest.pt"]


def test_retention_of_a_run_stopped_by_a_rule_keeps_no_weights_and_says_why(remote_settings, store, gpu_server):
    # the procedure's table: failed runs keep logs, metrics and config, no weights (before: the best was kept,
    # and nothing said which rule applied)
    ckpt = gpu_server.code / "ckpt"
    ckpt.mkdir()
    for i, name in enumerate(["epoch_1_val_loss=2.0.pt", "epoch_2_val_loss=9.9.pt", "best.pt"], start=1):
        (ckpt / name).write_text("w" * 10)
        os.utime(ckpt / name, (i, i))
    stop = {"by": "policy", "rule": "nan-loss", "reason": "loss is NaN"}
    asked = make_event(t.STOP_REQUESTED, run="a", host="h", producer="eval/a", seq=1, data=stop)
    store.append(
        [asked, make_event(t.STOP_DONE, run="a", host="h", producer="act/a", seq=2, data={"detail": "ctrl-c"})]
    )
    dry = cli(remote_settings, "checkpoints", "a")
    assert dry.returncode == 0, dry.stderr
    assert ("failed run (stopped by rule nan-loss): the procedure keeps logs, metrics and config, no weights; "
            "set checkpoints.failed_runs: keep_best to keep the best") in dry.stdout  # fmt: skip
    assert "delete  best.pt" in dry.stdout and "dry run: 3 checkpoint(s)" in dry.stdout
    applied = cli(remote_settings, "checkpoints", "a", "--apply")
    assert applied.returncode == 0, applied.stderr
    assert list(ckpt.iterdir()) == []
    reasons = {e.data["reason"] for e in events_of(store, "a", t.CHECKPOINT_DELETED)}
    assert reasons == {"retention: failed run (stopped by rule nan-loss), checkpoints.failed_runs: no_weights"}


def test_retention_deletes_hf_checkpoint_dirs_whole_and_keeps_the_recorded_best(remote_settings, store, gpu_server):
    ckpt = gpu_server.code / "ckpt"
    for n in range(1, 5):
        (ckpt / f"checkpoint-{n}").mkdir(parents=True)
        (ckpt / f"checkpoint-{n}" / "model.safetensors").write_bytes(b"w" * 100)
        state = {"best_model_checkpoint": str(ckpt / "checkpoint-2"), "global_step": n}
        (ckpt / f"checkpoint-{n}" / "trainer_state.json").write_text(json.dumps(state))
    applied = cli(remote_settings, "checkpoints", "a", "--apply")
    assert applied.returncode == 0, applied.stderr
    assert (
        "best per the run's record: checkpoint-2 (checkpoint-4/trainer_state.json best_model_checkpoint)"
        in applied.stdout
    )
    assert sorted(p.name for p in ckpt.iterdir()) == ["checkpoint-2", "checkpoint-4"]
    assert sorted(e.data["path"].rsplit("/", 1)[1] for e in events_of(store, "a", t.CHECKPOINT_DELETED)) == [
        "checkpoint-1", "checkpoint-3"]  # fmt: skip


def test_plan_run_status_and_collect(remote_settings, store, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: p1\nexperiments: [a, b]\n")
    out = cli(remote_settings, "plan", "run", str(plan), env=KEY)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "a: launched on gpu1 GPUs [0]" in out.stdout and "plan p1 done: a=finished, b=finished" in out.stdout
    status = cli(remote_settings, "plan", "status", str(plan))
    assert "b                        finished" in status.stdout and "(after a)" in status.stdout
    with socket.socket() as s:  # W&B asked at a 127.0.0.1 port nothing listens on: said unreachable
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    wandb_env = {**KEY, "WANDB_BASE_URL": f"http://127.0.0.1:{closed}", "WANDB_CONFIG_DIR": str(tmp_path / "wbc"),
                 "WANDB_CACHE_DIR": str(tmp_path / "wbc"), "WANDB_DATA_DIR": str(tmp_path / "wbc")}  # fmt: skip
    collected = cli(remote_settings, "collect", "--wandb-timeout", "2", env=wandb_env)  # --out: the project root
    assert collected.returncode == 0, collected.stderr
    proj = remote_settings.parent  # experiments/ is beside the settings here: the project root
    assert f"wrote {proj / 'findings.md'}" in collected.stdout
    runs = yaml.safe_load((proj / "training" / "runs.yaml").read_text())["runs"]
    by_name = {r["run"]: r for r in runs}
    assert by_name["a"]["status"] == "finished" and by_name["b"]["plan"] == "p1"
    assert by_name["a"]["wandb_pull"].startswith("unreachable (needs network and WANDB_API_KEY)")
    status_yaml = yaml.safe_load((proj / "status.yaml").read_text())
    assert status_yaml["training_status"]["overall"] == "done"


def test_the_worker_warns_at_start_when_resumes_would_have_no_wandb_key(remote_settings, tmp_path):
    (tmp_path / "experiments" / "exp-r.yaml").write_text(yaml.safe_dump({
        "name": "r", "server": "gpu1", "command": "python train.py", "resume_command": "python train.py --resume x",
        "wandb": {"project": "proj"}}))  # fmt: skip
    bare = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    without = subprocess.run(cli_argv(remote_settings, "worker", "--burst"), capture_output=True, text=True, cwd=REPO,
                             timeout=120, env=bare, check=False)  # fmt: skip
    assert without.returncode == 0, without.stderr
    assert "WANDB_API_KEY is not set: resumes of r will be refused (preflight wandb_login)" in without.stderr
    assert "export WANDB_API_KEY in the environment of `trainwarden up`" in without.stderr
    with_key = cli(remote_settings, "worker", "--burst", env=KEY)
    assert with_key.returncode == 0, with_key.stderr
    assert "WANDB_API_KEY is not set" not in with_key.stderr

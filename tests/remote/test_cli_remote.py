"""The remote commands through the real CLI: config check, preflight, launch, stop, retention, plans, collect."""

import os
import subprocess
import sys

import pytest
import yaml
from trainwarden.events import types as t

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.ssh, pytest.mark.slow]

KEY = {"WANDB_API_KEY": "good-key-0123456789"}


@pytest.fixture
def remote_settings(settings_file, gpu_server, tmp_path):
    s = gpu_server.server
    servers = tmp_path / "servers.yaml"
    servers.write_text(yaml.safe_dump({"servers": [{
        "name": s.name, "host": s.host, "port": s.port, "user": s.user, "key_file": str(s.key_file),
        "known_hosts": str(s.known_hosts), "gpus": list(s.gpus), "work_dir": s.work_dir, "venv": s.venv,
        "tmux_socket": s.tmux_socket, "min_free_gb": 0.001,
    }]}))  # fmt: skip
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
    assert launched.stderr == "" and len(launched.stdout.splitlines()) == 2  # launched ...; log: ...
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
    assert "delete  epoch_1_val_loss=3.0.pt" in dry.stdout and "dry run: 2 file(s)" in dry.stdout
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


def test_plan_run_status_and_collect(remote_settings, store, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: p1\nexperiments: [a, b]\n")
    out = cli(remote_settings, "plan", "run", str(plan), env=KEY)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "a: launched on gpu1 GPUs [0]" in out.stdout and "plan p1 done: a=finished, b=finished" in out.stdout
    status = cli(remote_settings, "plan", "status", str(plan))
    assert "b                        finished" in status.stdout and "(after a)" in status.stdout
    collected = cli(remote_settings, "collect", "--out", str(tmp_path / "proj"))
    assert collected.returncode == 0, collected.stderr
    runs = yaml.safe_load((tmp_path / "proj" / "training" / "runs.yaml").read_text())["runs"]
    by_name = {r["run"]: r for r in runs}
    assert by_name["a"]["status"] == "finished" and by_name["b"]["plan"] == "p1"
    status_yaml = yaml.safe_load((tmp_path / "proj" / "status.yaml").read_text())
    assert status_yaml["training_status"]["overall"] == "done"

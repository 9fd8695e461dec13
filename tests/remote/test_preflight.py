"""Preflight against a real sshd on 127.0.0.1: it agrees with launch on the W&B guard, each failure says
its own cause and fix (no cascade from a missing env), and a failed preflight leaves nothing on the server."""

import pytest
from trainwarden.events import types as t
from trainwarden.remote.errors import PreflightFailed, WandbGuardRefused
from trainwarden.remote.fleet import CheckpointConfig

from tests.helpers import events_of
from tests.remote.conftest import experiment, launcher

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.ssh]


def by_name(results):
    return {r.name: r for r in results}


@pytest.mark.parametrize(
    "exp",
    [
        experiment(env={"WANDB_MODE": "offline"}),
        experiment(env={"WANDB_DISABLED": "true"}),
        experiment(command=("env", "WANDB_MODE=disabled", "python", "train.py")),
    ],
    ids=["env-offline", "env-disabled", "command-disabled"],
)
def test_preflight_fails_what_launch_refuses(pool, store, gpu_server, exp):
    # preflight passed these (it never asked the guard), then launch refused them
    tw = launcher(pool, store, gpu_server, exp)
    results = by_name(tw.preflight(exp, [0]))
    guard = results["wandb_guard"]
    assert not guard.ok and "offline run is invalid" in guard.detail
    assert "allow_offline_wandb" in guard.remedy
    assert "wandb_login" not in results  # the guard says the cause; no `wandb login` advice beside it
    with pytest.raises(WandbGuardRefused) as refused:
        tw.launch("exp01")
    assert guard.detail in str(refused.value)


def test_preflight_passes_what_launch_takes(pool, store, gpu_server):
    exp = experiment(env={"WANDB_MODE": "offline"}, allow_offline_wandb=True, command=("true",))
    tw = launcher(pool, store, gpu_server, exp)
    results = tw.preflight(exp, [0])
    assert all(r.ok for r in results), results
    assert by_name(results)["wandb_guard"].detail == "offline allowed (allow_offline_wandb)"
    tw.launch("exp01")
    assert len(events_of(store, "exp01", t.RUN_LAUNCHED)) == 1


def test_a_missing_env_fails_once_and_skips_what_needs_it(pool, store, gpu_server):
    from dataclasses import replace

    gpu_server.server = replace(gpu_server.server, venv=str(gpu_server.root / "no-such-venv"))
    tw = launcher(pool, store, gpu_server, experiment())
    results = by_name(tw.preflight(experiment(), [0]))
    assert results["python_env"].failed and "no-such-venv/bin/activate" in results["python_env"].detail
    for name in ("torch_gpus", "gpus_free", "wandb_login"):
        assert results[name].skipped and not results[name].failed, results[name]
        assert results[name].detail == "not checked: python_env failed first"
    with pytest.raises(PreflightFailed) as info:
        tw.launch("exp01")
    assert "wandb login" not in str(info.value) and "torch" not in str(info.value)
    (refused,) = events_of(store, "exp01", t.LAUNCH_REFUSED)
    assert refused.data["check"] == "python_env"
    assert "wandb_login" not in [e.data["check"] for e in events_of(store, "exp01", t.PREFLIGHT)]


@pytest.mark.parametrize(
    ("missing", "check", "fix", "not_fix"),
    [
        ("nvidia-smi", "gpus_free", "install the NVIDIA driver (nvidia-smi) on gpu1", "pick free GPUs"),
        ("wandb", "wandb_login", "install wandb in the env", "wandb login"),
    ],
)
def test_a_missing_command_says_to_install_it(pool, store, gpu_server, missing, check, fix, not_fix):
    (gpu_server.venv / "bin" / missing).unlink()
    results = by_name(launcher(pool, store, gpu_server, experiment()).preflight(experiment(), [0]))
    assert results[check].failed
    assert fix in results[check].remedy and not_fix not in results[check].remedy
    assert "not found" in results[check].detail


def test_a_missing_code_dir_names_it(pool, store, gpu_server):
    exp = experiment(code_dir=str(gpu_server.root / "nope"))
    results = by_name(launcher(pool, store, gpu_server, exp).preflight(exp, [0]))
    assert results["code_dir"].detail == f"{gpu_server.root / 'nope'} does not exist on gpu1"


def test_a_failed_preflight_creates_nothing_and_a_launch_makes_the_checkpoint_dir(pool, store, gpu_server):
    ckpt = gpu_server.root / "data" / "ckpt" / "exp01"
    exp = experiment(checkpoints=CheckpointConfig(dir=str(ckpt)), command=("true",))
    gpu_server.set_busy("GPU-aaaa, 4242, python")
    tw = launcher(pool, store, gpu_server, exp)
    with pytest.raises(PreflightFailed, match="gpus_free"):
        tw.launch("exp01")
    (disk,) = [e for e in events_of(store, "exp01", t.PREFLIGHT) if e.data["check"] == "disk"]
    assert disk.data["ok"]  # the disk was measured on the nearest directory that exists
    assert not (gpu_server.root / "data").exists()
    assert not (gpu_server.root / "work" / ".trainwarden").exists()
    gpu_server.set_busy()
    tw.launch("exp01")
    assert ckpt.is_dir()

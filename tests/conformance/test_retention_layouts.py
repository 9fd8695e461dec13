"""Retention over the checkpoint directories the real trainers write (HF Trainer, Lightning's
ModelCheckpoint), trained for five steps in the framework venv: the best they record and the last are kept,
the plain intermediates planned for deletion, and an HF `checkpoint-N/` goes whole.

The listing, the record's reading and the deletion are retention's own shell commands, run here by a local
shell (the same commands SshPool runs on a server; tests/remote runs them over a real sshd)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from trainwarden.remote.fleet import CheckpointConfig, Server
from trainwarden.remote.retention import delete_checkpoints, list_checkpoints, plan_retention, read_record
from trainwarden.remote.ssh import DEFAULT_COMMAND_TIMEOUT_S, CommandResult

from tests.conformance.runner import REPO, SCRIPTS

VENVS = {".venv-frameworks": "requirements.txt", ".venv-hf4": "requirements-hf4.txt"}  # transformers 5.x, 4.x
SERVER = Server(name="local", host="127.0.0.1", user="nobody", work_dir="/tmp")  # never connected to


class LocalShell:
    """RemoteShell's `run` on this machine: bash -c, as sshd's login shell runs a command."""

    def run(self, server: Server, command: str, *, timeout: float = DEFAULT_COMMAND_TIMEOUT_S,
            stdin: str | None = None) -> CommandResult:  # fmt: skip
        done = subprocess.run(["bash", "-c", command], input=stdin, capture_output=True, text=True, timeout=timeout,
                              check=False)  # fmt: skip
        return CommandResult(done.returncode, done.stdout, done.stderr)

    def write_files(
        self, server: Server, files: Mapping[str, tuple[bytes, int]], *, remove: Sequence[str] = ()
    ) -> None:
        raise NotImplementedError("retention writes no files")


def train(framework: str, out: Path, venv: str = ".venv-frameworks") -> None:
    stamp = REPO / venv / ".fw-stamp"
    want = hashlib.sha256((REPO / "tests" / "conformance" / VENVS[venv]).read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text().strip() != want:
        why = f"{venv} is not installed (./dev.sh frameworks installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    done = subprocess.run([str(REPO / venv / "bin" / "python"), "ckpt_layouts.py", framework, str(out)], cwd=SCRIPTS,
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "CONFORMANCE_PACE_S": "0", "TOKENIZERS_PARALLELISM": "false"})  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.parametrize("venv", list(VENVS))
def test_hf_trainer_checkpoints(tmp_path, venv):
    out = tmp_path / "hf"
    train("hf", out, venv)
    config = CheckpointConfig(dir=str(out), pattern="checkpoint-*")
    shell = LocalShell()
    files = list_checkpoints(shell, SERVER, config)
    assert sorted(f.name for f in files) == [f"checkpoint-{n}" for n in range(1, 6)]
    assert {f.kind for f in files} == {"d"}
    record = read_record(shell, SERVER, config, files)
    assert record is not None and record.name == "checkpoint-2", record
    plan = plan_retention(files, config, failed=False, record=record)
    assert set(plan.keep) == {"checkpoint-2", "checkpoint-5"}
    assert plan.delete == ("checkpoint-1", "checkpoint-3", "checkpoint-4")
    gone = delete_checkpoints(shell, SERVER, config, [f for f in files if f.name in plan.delete])
    assert sorted(gone) == list(plan.delete)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-2", "checkpoint-5"]
    assert (out / "checkpoint-2" / "model.safetensors").exists()


def test_lightning_model_checkpoint(tmp_path):
    out = tmp_path / "lightning"
    train("lightning", out)
    shell = LocalShell()
    plain = CheckpointConfig(dir=str(out / "plain"), pattern="*.ckpt", best_metric="val_loss")
    files = list_checkpoints(shell, SERVER, plain)
    assert sorted(f.name for f in files) == [*(f"epoch=0-step={n}.ckpt" for n in range(1, 6)), "last.ckpt"]
    record = read_record(shell, SERVER, plain, files)
    assert record is not None and record.name == "epoch=0-step=2.ckpt", record
    plan = plan_retention(files, plain, failed=False, record=record)
    assert set(plan.keep) == {"epoch=0-step=2.ckpt", "epoch=0-step=5.ckpt", "last.ckpt"}
    assert plan.delete == ("epoch=0-step=1.ckpt", "epoch=0-step=3.ckpt", "epoch=0-step=4.ckpt")
    named = CheckpointConfig(dir=str(out / "named"), pattern="*.ckpt", best_metric="val_loss")
    files = list_checkpoints(shell, SERVER, named)
    by_names = plan_retention(files, named, failed=False)  # the metric in the names alone
    assert by_names.keep["epoch=0-step=2-val_loss=0.30.ckpt"] == ("best val_loss=0.3",)
    assert set(by_names.keep) == {"epoch=0-step=2-val_loss=0.30.ckpt", "epoch=0-step=5-val_loss=0.80.ckpt", "last.ckpt"}
    record = read_record(shell, SERVER, named, files)
    assert record is not None and record.name == "epoch=0-step=2-val_loss=0.30.ckpt", record

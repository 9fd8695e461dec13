"""Retention over a real sshd: HF's `checkpoint-N/` directories listed, sized and deleted whole, the best
read from trainer_state.json and from Lightning's pickled best_model_path, nothing else touched."""

import json
import os
import pickle
import zipfile
from pathlib import Path

import pytest
from trainwarden.remote.fleet import CheckpointConfig
from trainwarden.remote.retention import delete_checkpoints, list_checkpoints, plan_retention, read_record

pytestmark = [pytest.mark.ssh]


def hf_layout(out: Path, steps: int, best: int, *, state_text: str | None = None) -> None:
    """What HF Trainer writes with save_steps=1 and no save_total_limit (names as in transformers 5.x)."""
    for n in range(1, steps + 1):
        d = out / f"checkpoint-{n}"
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(b"w" * 4096)
        (d / "optimizer.pt").write_bytes(b"o" * 2048)
        state = {"best_model_checkpoint": str(out / f"checkpoint-{min(n, best)}"), "global_step": n, "log_history": []}
        (d / "trainer_state.json").write_text(state_text if state_text and n == steps else json.dumps(state))
        os.utime(d, (n, n))
    (out / "runs").mkdir()  # TensorBoard's dir beside them: no checkpoint
    (out / "runs" / "events.out").write_text("tb")


def test_hf_checkpoint_dirs_listed_and_deleted_whole(pool, gpu_server):
    out = gpu_server.code / "out"
    hf_layout(out, steps=4, best=2)
    config = CheckpointConfig(dir=str(out), pattern="checkpoint-*")
    files = list_checkpoints(pool, gpu_server.server, config)
    assert sorted((f.name, f.kind, f.step) for f in files) == [(f"checkpoint-{n}", "d", n) for n in range(1, 5)]
    assert all(f.size >= 4096 + 2048 for f in files)  # the directory's content, not its inode
    record = read_record(pool, gpu_server.server, config, files)
    assert record is not None and record.name == "checkpoint-2"
    plan = plan_retention(files, config, failed=False, record=record)
    assert set(plan.keep) == {"checkpoint-2", "checkpoint-4"}
    gone = delete_checkpoints(pool, gpu_server.server, config, [f for f in files if f.name in plan.delete])
    assert sorted(gone) == ["checkpoint-1", "checkpoint-3"]
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-2", "checkpoint-4", "runs"]
    assert sorted(p.name for p in (out / "checkpoint-2").iterdir()) == ["model.safetensors", "optimizer.pt",
                                                                        "trainer_state.json"]  # fmt: skip


def test_hf_unreadable_trainer_state_deletes_nothing(pool, gpu_server):
    out = gpu_server.code / "out"
    hf_layout(out, steps=3, best=1, state_text='{"best_model_checkpoint": "/out/chec')
    config = CheckpointConfig(dir=str(out), pattern="checkpoint-*")
    files = list_checkpoints(pool, gpu_server.server, config)
    record = read_record(pool, gpu_server.server, config, files)
    assert (
        record is not None and not record.readable and "checkpoint-3/trainer_state.json is not JSON" in str(record.note)
    )
    assert plan_retention(files, config, failed=False, record=record).delete == ()


def lightning_ckpt(path: Path, best: str) -> None:
    """A .ckpt as torch.save lays it out (zip, stored, `archive/data.pkl` first, protocol 2) holding
    ModelCheckpoint's state, then a tensor blob."""
    state = {
        "epoch": 0,
        "global_step": 5,
        "callbacks": {
            "ModelCheckpoint{'monitor': 'val_loss'}": {
                "monitor": "val_loss",
                "best_model_score": None,
                "best_model_path": best,
                "dirpath": str(path.parent),
            }
        },
    }
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle.dumps(state, protocol=2))
        z.writestr("archive/data/0", os.urandom(1 << 20))


def test_lightning_best_model_path_read_over_ssh_and_a_linked_last_keeps_its_target(pool, gpu_server):
    ckpt = gpu_server.code / "ckpt"
    ckpt.mkdir()
    for n in range(1, 5):
        lightning_ckpt(ckpt / f"epoch=0-step={n}.ckpt", best=str(ckpt / "epoch=0-step=2.ckpt"))
        os.utime(ckpt / f"epoch=0-step={n}.ckpt", (n, n))
    (ckpt / "last.ckpt").symlink_to(ckpt / "epoch=0-step=4.ckpt")  # save_last="link"
    config = CheckpointConfig(dir=str(ckpt), pattern="*.ckpt", best_metric="val_loss")
    files = list_checkpoints(pool, gpu_server.server, config)
    assert {f.name: f.kind for f in files}["last.ckpt"] == "l"
    record = read_record(pool, gpu_server.server, config, files)
    assert record is not None and record.name == "epoch=0-step=2.ckpt" and record.source == "last.ckpt best_model_path"
    plan = plan_retention(files, config, failed=False, record=record)
    assert plan.keep["epoch=0-step=4.ckpt"] == ("latest", "target of last.ckpt")
    gone = delete_checkpoints(pool, gpu_server.server, config, [f for f in files if f.name in plan.delete])
    assert sorted(gone) == ["epoch=0-step=1.ckpt", "epoch=0-step=3.ckpt"]
    assert sorted(p.name for p in ckpt.iterdir()) == ["epoch=0-step=2.ckpt", "epoch=0-step=4.ckpt", "last.ckpt"]

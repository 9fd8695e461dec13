"""The trainer callbacks write what the trainer logged, with its own step, to the sidecar file.

Hugging Face: transformers imports without torch, so the real `CallbackHandler` (what `Trainer` calls)
drives the callback with real `TrainingArguments`, `TrainerState` and `TrainerControl`, replaying the
`log_history` of a real run's trainer_state.json (each entry is an `on_log` dict plus its step).
Lightning needs torch, which CI does not install: its callback is driven by a stand-in trainer with
the attributes Lightning documents (`callback_metrics`, `global_step`, `is_global_zero`,
`log_every_n_steps`, `sanity_checking`) and 0-d numpy arrays where Lightning holds 0-d tensors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from trainwarden.sdk.integrations.lightning import TrainwardenCallback as LightningCallback

REAL = Path(__file__).parents[1] / "data" / "real"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(autouse=True)
def _alone(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "LOCAL_RANK", "TRAINWARDEN_METRICS"):
        monkeypatch.delenv(name, raising=False)


def test_hf_trainer_logs_reach_the_sidecar_with_the_global_step(tmp_path: Path) -> None:
    import transformers  # the `test` extra installs it (without torch); imported here: it takes seconds
    from trainwarden.sdk.integrations.hf import TrainwardenCallback
    from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback, TrainerControl, TrainerState

    path = tmp_path / "train.log.metrics.jsonl"
    callback = TrainwardenCallback(path)
    assert isinstance(callback, transformers.TrainerCallback)
    handler = CallbackHandler([DefaultFlowCallback, callback], None, None, None, None)
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[])
    recorded = TrainerState.load_from_json(str(REAL / "hf_state_distilbert_lora_imdb_healthy.trainer_state.json"))
    state, control = TrainerState(), TrainerControl()
    for entry in recorded.log_history:
        state.global_step = entry["step"]
        handler.on_log(args, state, control, {k: v for k, v in entry.items() if k != "step"})
    written = lines(path)
    assert written == [{"step": e["step"], **{k: v for k, v in e.items() if k != "step"}} for e in recorded.log_history]
    assert any("eval_loss" in w for w in written) and any("grad_norm" in w for w in written)


def test_hf_writes_nothing_off_the_main_process(tmp_path: Path) -> None:
    import transformers
    from trainwarden.sdk.integrations.hf import TrainwardenCallback
    from transformers.trainer_callback import CallbackHandler, TrainerControl, TrainerState

    path = tmp_path / "m.jsonl"
    handler = CallbackHandler([TrainwardenCallback(path)], None, None, None, None)
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[])
    state = TrainerState(global_step=20, is_world_process_zero=False)
    handler.on_log(args, state, TrainerControl(), {"loss": 0.6899, "epoch": 0.16})
    assert not path.exists()


@dataclass
class LightningTrainer:
    """The attributes of `lightning.pytorch.Trainer` the callback reads."""

    log_every_n_steps: int = 2
    global_step: int = 0
    is_global_zero: bool = True
    sanity_checking: bool = False
    callback_metrics: dict[str, Any] = field(default_factory=dict)


def test_lightning_writes_training_metrics_at_logging_steps_and_validation_metrics_once(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    cb = LightningCallback(path)
    trainer = LightningTrainer()

    def batch(step: int, loss: float) -> None:
        trainer.global_step = step
        trainer.callback_metrics["train_loss"] = np.array(loss, dtype=np.float32)
        cb.on_train_batch_end(trainer, None, None, None, step)

    trainer.sanity_checking = True
    trainer.callback_metrics["val_loss"] = np.array(9.0)
    cb.on_validation_end(trainer, None)  # the sanity check: not a validation of training
    trainer.sanity_checking = False
    del trainer.callback_metrics["val_loss"]
    batch(1, 2.5)  # not a logging step
    batch(2, 2.25)
    batch(2, 2.25)  # another micro-batch of the same optimizer step (gradient accumulation)
    trainer.callback_metrics.update(val_loss=np.array(2.0), val_acc=np.array(0.5))
    cb.on_validation_end(trainer, None)
    batch(4, 1.75)  # val_loss is still in callback_metrics: not written again
    assert lines(path) == [
        {"step": 2, "train_loss": 2.25},
        {"step": 2, "val_loss": 2.0, "val_acc": 0.5},
        {"step": 4, "train_loss": 1.75},
    ]


def test_lightning_tells_training_from_validation_metrics_before_its_first_logging_step(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    cb = LightningCallback(path)
    trainer = LightningTrainer(log_every_n_steps=50, global_step=1, callback_metrics={"loss": np.array(2.5)})
    cb.on_train_batch_end(trainer, None, None, None, 0)  # step 1: nothing written, but `loss` is training's
    trainer.callback_metrics["val_loss"] = np.array(2.4)
    cb.on_validation_end(trainer, None)  # val_check_interval=1: validation before the first logging step
    trainer.global_step = 50
    trainer.callback_metrics["loss"] = np.array(1.5)
    cb.on_train_batch_end(trainer, None, None, None, 49)
    assert lines(path) == [{"step": 1, "val_loss": 2.4}, {"step": 50, "loss": 1.5}]


def test_lightning_writes_nothing_off_global_zero(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    cb = LightningCallback(path)
    trainer = LightningTrainer(global_step=2, is_global_zero=False, callback_metrics={"loss": np.array(1.0)})
    cb.on_train_batch_end(trainer, None, None, None, 0)
    cb.on_validation_end(trainer, None)
    assert not path.exists()


HIDE_FRAMEWORKS = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("transformers", "lightning", "pytorch_lightning", "torch"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
from trainwarden.sdk.integrations import hf, lightning
hf.TrainwardenCallback(sys.argv[1]).on_log(None, type("S", (), {"is_world_process_zero": True, "global_step": 3})(),
                                           None, {"loss": 1.5})
print(hf.TrainwardenCallback.__mro__[-2].__name__, lightning.TrainwardenCallback.__mro__[-2].__name__)
"""


def test_the_callback_modules_import_without_their_frameworks(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "m.jsonl"
    done = subprocess.run([sys.executable, "-c", HIDE_FRAMEWORKS, str(path)], capture_output=True, text=True,
                          timeout=60, check=False, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["_Base", "_Base"]  # plain classes: nothing of the frameworks underneath
    assert lines(path) == [{"step": 3, "loss": 1.5}]

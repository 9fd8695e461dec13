"""Checkpoint directories written by the real trainers, for retention's tests (argv: hf|lightning OUT).

Five steps, a save and an evaluation after each, `save_total_limit` unset / `save_top_k=-1` so every
checkpoint stays; the validation loss follows VAL_LOSS, so the best is step 2, neither the first nor the last.
hf: OUT/checkpoint-1 ... checkpoint-5 (trainer_state.json names `best_model_checkpoint`);
lightning: OUT/plain (`epoch=0-step=N.ckpt`, `last.ckpt`: the best only in `best_model_path`) and OUT/named
(`epoch=0-step=N-val_loss=0.30.ckpt`, `last.ckpt`). Run with CONFORMANCE_PACE_S=0 (tiny.py reads it on import)."""

from __future__ import annotations

import os
import sys

import torch
from tiny import PLANS, Dataset, Tiny, data

VAL_LOSS = (0.9, 0.3, 0.5, 0.7, 0.8)
STEPS = len(VAL_LOSS)


def hf(out: str) -> None:
    from transformers import Trainer, TrainingArguments

    class Model(Tiny):
        evals = 0

        def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
            if self.training:
                return {"loss": self.loss(x, labels)}
            self.evals += 1  # one batch per evaluation: the n-th evaluation's loss is VAL_LOSS[n-1]
            return {"loss": torch.tensor(VAL_LOSS[self.evals - 1])}

    args = TrainingArguments(
        output_dir=out, max_steps=STEPS, per_device_train_batch_size=32, per_device_eval_batch_size=64,
        eval_strategy="steps", eval_steps=1, save_strategy="steps", save_steps=1, load_best_model_at_end=True,
        metric_for_best_model="eval_loss", greater_is_better=False, report_to="none", use_cpu=True, optim="sgd",
        logging_steps=1, dataloader_num_workers=0, seed=0,
    )  # fmt: skip
    x, y = data(STEPS * 32)
    trainer = Trainer(model=Model(PLANS["healthy"]), args=args, train_dataset=Dataset(x, y),
                      eval_dataset=Dataset(*data(64, seed=1)))  # fmt: skip
    trainer.train()


def lightning_run(out: str) -> None:
    import lightning
    from lightning.pytorch.callbacks import ModelCheckpoint

    class Module(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = Tiny(PLANS["healthy"])

        def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], i: int) -> torch.Tensor:
            return self.model.loss(*batch)

        def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], i: int) -> None:
            self.log("val_loss", VAL_LOSS[self.global_step - 1])

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.3)

    for sub, filename in (("plain", None), ("named", "{epoch}-{step}-{val_loss:.2f}")):
        torch.manual_seed(0)
        x, y = data(STEPS * 32)
        train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
        val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*data(64, seed=1)), batch_size=64)
        checkpoint = ModelCheckpoint(dirpath=os.path.join(out, sub), filename=filename, monitor="val_loss",
                                     mode="min", save_top_k=-1, save_last=True)  # fmt: skip
        trainer = lightning.Trainer(max_steps=STEPS, val_check_interval=1, check_val_every_n_epoch=None,
                                    callbacks=[checkpoint], logger=False, accelerator="cpu",
                                    enable_progress_bar=False, num_sanity_val_steps=0)  # fmt: skip
        trainer.fit(Module(), train, val)


if __name__ == "__main__":
    {"hf": hf, "lightning": lightning_run}[sys.argv[1]](sys.argv[2])

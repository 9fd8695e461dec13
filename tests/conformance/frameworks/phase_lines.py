"""Prints what a framework prints around its evals and checkpoint saves (argv: lightning | keras | hf), for
tests/conformance/test_phase_lines.py: a tiny fit with the framework's own eval loop and checkpoint callback, at
the verbosity a user sets to see them (Lightning's ModelCheckpoint(verbose=True), Keras' ModelCheckpoint(verbose=1),
HF Trainer's log_level="info")."""

from __future__ import annotations

import os
import sys


def lightning_fit(out: str) -> None:
    import lightning
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint, TQDMProgressBar

    class Module(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 2)

        def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], i: int) -> torch.Tensor:
            loss = torch.nn.functional.cross_entropy(self.layer(batch[0]), batch[1])
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], i: int) -> None:
            self.log("val_loss", torch.nn.functional.cross_entropy(self.layer(batch[0]), batch[1]), prog_bar=True)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    x, y = torch.randn(64, 8), torch.randint(0, 2, (64,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    ckpt = ModelCheckpoint(dirpath=out, monitor="val_loss", verbose=True)
    trainer = lightning.Trainer(max_epochs=2, callbacks=[TQDMProgressBar(), ckpt], logger=False,
                                num_sanity_val_steps=0, accelerator="cpu")  # fmt: skip
    trainer.fit(Module(), loader, loader)


def keras_fit(out: str) -> None:
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = np.random.rand(64, 8).astype("float32"), np.random.randint(0, 2, 64)
    ckpt = keras.callbacks.ModelCheckpoint(os.path.join(out, "best.keras"), monitor="val_loss", verbose=1)
    model.fit(x, y, validation_data=(x, y), epochs=2, verbose=2, callbacks=[ckpt])


def hf_fit(out: str) -> None:
    import torch
    from transformers import Trainer, TrainingArguments

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 2)

        def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
            logits = self.layer(x)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    rows = [{"x": torch.randn(8), "labels": int(i % 2)} for i in range(32)]
    args = TrainingArguments(output_dir=out, max_steps=4, per_device_train_batch_size=8, eval_strategy="steps",
                             eval_steps=2, save_steps=2, logging_steps=1, log_level="info", report_to=[],
                             use_cpu=True, disable_tqdm=False)  # fmt: skip
    Trainer(model=Model(), args=args, train_dataset=rows, eval_dataset=rows).train()


if __name__ == "__main__":
    {"lightning": lightning_fit, "keras": keras_fit, "hf": hf_fit}[sys.argv[1]](sys.argv[2])

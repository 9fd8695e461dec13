"""Hugging Face Trainer (4.x or 5.x, whichever the venv holds) with its default console: the logs dicts
every step, evaluation every EVAL_EVERY steps, the tqdm bar (argv: SCENARIO)."""

from __future__ import annotations

import os
import tempfile

import torch
from tiny import EVAL_EVERY, STEPS, Dataset, Tiny, data, plan
from transformers import Trainer, TrainingArguments


class Model(Tiny):
    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": self.loss(x, labels)}


def main() -> None:
    p = plan()
    torch.manual_seed(0)
    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(), max_steps=STEPS, per_device_train_batch_size=32, learning_rate=p.lr,
        logging_steps=1, eval_strategy="steps", eval_steps=EVAL_EVERY, save_strategy="no", report_to="none",
        use_cpu=True, optim="sgd", lr_scheduler_type="constant", dataloader_num_workers=0, seed=0,
    )  # fmt: skip
    x, y = data(identical=p.identical)
    trainer = Trainer(model=Model(p), args=args, train_dataset=Dataset(x, y), eval_dataset=Dataset(*data(256, seed=1)))
    trainer.train()


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()

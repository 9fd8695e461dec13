"""Hugging Face Trainer (4.x or 5.x, whichever the venv holds) with its default console: the logs dicts
every step, evaluation every EVAL_EVERY steps, the tqdm bar (argv: SCENARIO).

slow_phases: the Trainer's own eval and save, each slow, with `log_level="info"` (its `***** Running Evaluation
*****` and `Saving model checkpoint to ...` lines): the eval at step 20 reads its 250 samples from slow storage
(PHASE_S in all), and a callback's `on_save` uploads the step-30 checkpoint for PHASE_S (frameworks/slow.py has
the plain loop's). Trainer 5 evaluates again at the end of training (step 35): a second slow eval."""

from __future__ import annotations

import os
import sys
import tempfile
import time

import torch
from slow import PHASE_S
from tiny import EVAL_EVERY, PLANS, STEPS, Dataset, Tiny, data
from transformers import Trainer, TrainerCallback, TrainerState, TrainingArguments


class Model(Tiny):
    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": self.loss(x, labels)}


class SlowDataset(Dataset):
    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        time.sleep(PHASE_S / len(self))  # one sample read from slow storage
        return super().__getitem__(i)


class SlowUpload(TrainerCallback):
    def on_save(self, args: TrainingArguments, state: TrainerState, control: object, **kwargs: object) -> None:
        if state.global_step == 30:  # not the final save, after the last step: the run ends there
            time.sleep(PHASE_S)  # the checkpoint copied to slow storage (a network file system, a bucket)


def main() -> None:
    scenario = sys.argv[1]
    slow = scenario == "slow_phases"
    p = PLANS.get(scenario, PLANS["healthy"])
    torch.manual_seed(0)
    phases = {"max_steps": 35, "eval_steps": 20, "save_strategy": "steps", "save_steps": 30, "log_level": "info"}
    args = TrainingArguments(**{
        "output_dir": tempfile.mkdtemp(), "max_steps": STEPS, "per_device_train_batch_size": 32, "learning_rate": p.lr,
        "logging_steps": 1, "eval_strategy": "steps", "eval_steps": EVAL_EVERY, "save_strategy": "no",
        "report_to": "none", "use_cpu": True, "optim": "sgd", "lr_scheduler_type": "constant",
        "dataloader_num_workers": 0, "seed": 0, **(phases if slow else {}),
    })  # fmt: skip
    x, y = data(identical=p.identical)
    evalset = (SlowDataset if slow else Dataset)(*data(250 if slow else 256, seed=1))
    trainer = Trainer(model=Model(p), args=args, train_dataset=Dataset(x, y), eval_dataset=evalset,
                      callbacks=[SlowUpload()] if slow else None)  # fmt: skip
    trainer.train()


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()

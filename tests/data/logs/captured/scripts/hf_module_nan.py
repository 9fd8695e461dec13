"""transformers 5.x Trainer on a 4->1 linear model whose loss turns NaN after 4 training forwards."""

import torch
from torch import nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments

torch.manual_seed(0)


class DS(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        x = torch.randn(4, generator=torch.Generator().manual_seed(i))
        return {"x": x, "labels": x.sum(0, keepdim=True)}


class Tiny(nn.Module):
    """A real NaN through the Trainer: the loss is multiplied by NaN from the fifth training forward."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.calls = 0

    def forward(self, x, labels=None):
        out = self.lin(x)
        loss = nn.functional.mse_loss(out, labels)
        if self.training:
            self.calls += 1
            if self.calls > 4:
                loss = loss * float("nan")
        return {"loss": loss, "logits": out}


args = TrainingArguments(
    output_dir="/tmp/fw/hf_out2",
    report_to="none",
    logging_steps=1,
    eval_strategy="steps",
    eval_steps=2,
    max_steps=6,
    per_device_train_batch_size=8,
    save_strategy="no",
    use_cpu=True,
)
Trainer(model=Tiny(), args=args, train_dataset=DS(), eval_dataset=DS()).train()

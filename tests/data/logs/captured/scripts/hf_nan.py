"""transformers 5.x Trainer on a one-layer GPT-2 with a learning rate of 1e4 (the loss diverges)."""

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

torch.manual_seed(0)


class DS(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, 64, (16,), generator=g)
        return {"input_ids": ids, "labels": ids.clone()}


cfg = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=32)
model = GPT2LMHeadModel(cfg)
args = TrainingArguments(
    output_dir="/tmp/fw/hf_out",
    report_to="none",
    logging_steps=1,
    eval_strategy="steps",
    eval_steps=3,
    max_steps=8,
    learning_rate=1e4,
    gradient_accumulation_steps=2,
    disable_tqdm=True,
    per_device_train_batch_size=4,
    per_device_eval_batch_size=4,
    save_strategy="no",
    use_cpu=True,
)
Trainer(model=model, args=args, train_dataset=DS(64), eval_dataset=DS(8)).train()

"""Lightning 2.6 on a 4->1 linear model: python pl_tiny.py rich|tqdm|default (the progress bar to capture)."""

import sys

import lightning as pl
import torch
from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class M(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def training_step(self, b, i):
        x, y = b
        loss = nn.functional.mse_loss(self.lin(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, b, i):
        x, y = b
        self.log("val_loss", nn.functional.mse_loss(self.lin(x), y), prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


x = torch.randn(64, 4)
y = x.sum(1, keepdim=True)
dl = DataLoader(TensorDataset(x, y), batch_size=8)
bar = {"rich": RichProgressBar(), "tqdm": TQDMProgressBar(refresh_rate=1)}.get(sys.argv[1])
cb = [bar] if bar else []
t = pl.Trainer(
    max_epochs=3, accelerator="cpu", logger=False, enable_checkpointing=False, callbacks=cb, log_every_n_steps=1
)
t.fit(M(), dl, dl)

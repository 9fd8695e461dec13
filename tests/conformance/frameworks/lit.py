"""Lightning (argv: SCENARIO BAR_OR_LOGGER): `tqdm` (TQDMProgressBar), `rich` (RichProgressBar), `csv`
(CSVLogger's metrics.csv, which the agent watches), `tb` (TensorBoardLogger's event files, watched)."""

from __future__ import annotations

import os
import sys

import lightning
import torch
from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from tiny import EVAL_EVERY, STEPS, Tiny, data, plan


class Module(lightning.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.p = plan()
        self.model = Tiny(self.p)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], i: int) -> torch.Tensor:
        loss = self.model.loss(*batch)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], i: int) -> None:
        self.log("val_loss", self.model.loss(*batch), prog_bar=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.p.lr)


def main() -> None:
    kind, out = sys.argv[2], os.environ.get("CONFORMANCE_OUT", ".")
    p = plan()
    torch.manual_seed(0)
    x, y = data(STEPS * 32, identical=p.identical)
    train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*data(128, seed=1)), batch_size=128)
    bar = RichProgressBar() if kind == "rich" else TQDMProgressBar()
    logger = {"csv": CSVLogger(out, name="csv", version=0, flush_logs_every_n_steps=1),
              "tb": TensorBoardLogger(out, name="tb", version=0)}.get(kind, False)  # fmt: skip
    trainer = lightning.Trainer(max_steps=STEPS, val_check_interval=EVAL_EVERY, check_val_every_n_epoch=None,
                        log_every_n_steps=1, callbacks=[bar], logger=logger, accelerator="cpu",
                        enable_checkpointing=False, num_sanity_val_steps=0)  # fmt: skip
    trainer.fit(Module(), train, val)


if __name__ == "__main__":
    main()

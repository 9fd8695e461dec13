"""A torch loop reporting through fastprogress, the progress library of fastai, which prints fastai's
console table: a header of names (`epoch     train_loss  valid_loss  accuracy  time`), then one row per
epoch in the same columns (argv: SCENARIO). fastai itself pins another torch; its table is fastprogress's
`ConsoleMasterBar.write(..., table=True)`, called here as fastai's Recorder calls it."""

from __future__ import annotations

import time

import torch
from fastprogress.fastprogress import format_time, master_bar, progress_bar
from tiny import Tiny, data, plan

EPOCHS = 12
BATCHES = 5


def main() -> None:
    p = plan()
    torch.manual_seed(0)
    model = Tiny(p)
    x, y = data(EPOCHS * BATCHES * 32, identical=p.identical)
    vx, vy = data(256, seed=1)
    opt = torch.optim.SGD(model.parameters(), lr=p.lr)
    mb = master_bar(range(EPOCHS))
    mb.write(["epoch", "train_loss", "valid_loss", "accuracy", "time"], table=True)
    for epoch in mb:
        start, losses = time.time(), []
        for b in progress_bar(range(BATCHES), parent=mb):
            i = (epoch * BATCHES + b) * 32
            model.train()
            loss = model.loss(x[i : i + 32], y[i : i + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            out = model.net(vx)
            val = torch.nn.functional.cross_entropy(out, vy).item()
            acc = (out.argmax(1) == vy).float().mean().item()
        row = [
            str(epoch),
            f"{sum(losses) / len(losses):.6f}",
            f"{val:.6f}",
            f"{acc:.6f}",
            format_time(time.time() - start),
        ]
        mb.write(row, table=True)


if __name__ == "__main__":
    main()

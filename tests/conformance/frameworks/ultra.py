"""A plain torch loop writing an ultralytics `results.csv` (argv: SCENARIO), as ultralytics 8.3's
`BaseTrainer.save_metrics` writes it: a header of `epoch,time,train/box_loss,...,metrics/mAP50-95(B),...`, then one
`%.6g` row per epoch, appended after each epoch's validation. The model is a tiny classifier standing in for a
detector: the "mAP" columns are its held-out accuracy at confidence thresholds 0.5 (mAP50) and 0.5-0.95 (mAP50-95).
map_peak: a wide model memorises 48 samples with noisy labels, so its mAP peaks in the first epochs and is never
beaten again; healthy: more data and a lower learning rate, its mAP climbing to the end."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch
from tiny import PACE_S, data, overfit_data
from torch import nn

KEYS = ("train/box_loss", "train/cls_loss", "train/dfl_loss", "metrics/precision(B)", "metrics/recall(B)",
        "metrics/mAP50(B)", "metrics/mAP50-95(B)", "val/box_loss", "val/cls_loss", "val/dfl_loss", "lr/pg0",
        "lr/pg1", "lr/pg2")  # fmt: skip
EPOCHS = {"map_peak": 40, "healthy": 24}


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float, float, float, float]:
    """Held-out loss, precision and recall of class 1, the accuracy (as mAP50), and the mean accuracy over ever
    harder subsets (as mAP50-95: the samples nearest the class boundary, as a stricter IoU keeps the hard boxes)."""
    with torch.no_grad():
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y).item()
        pred = logits.argmax(-1)
        tp = ((pred == 1) & (y == 1)).sum().item()
        precision, recall = tp / max(1, (pred == 1).sum().item()), tp / max(1, (y == 1).sum().item())
        right = (pred == y).float()[(x[:, 0] + 0.5 * x[:, 1]).abs().argsort()]  # hardest first
        at = [right[: len(right) * (10 - k) // 10].mean().item() for k in range(10)]
    return loss, precision, recall, right.mean().item(), sum(at) / len(at)


def main() -> None:
    scenario = sys.argv[1]
    torch.manual_seed(0)
    x, y = overfit_data() if scenario == "map_peak" else data(256)
    vx, vy = data(512, seed=1)
    model = nn.Sequential(nn.Linear(8, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2))
    lr = 1e-2 if scenario == "map_peak" else 2e-4
    opt = torch.optim.Adam(model.parameters(), lr)
    csv = Path(os.environ.get("CONFORMANCE_OUT", ".")) / "results.csv"
    start = time.time()
    for epoch in range(EPOCHS[scenario]):
        model.train()
        losses = []
        for i in range(0, len(x), 16):
            loss = nn.functional.cross_entropy(model(x[i : i + 16]), y[i : i + 16])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            time.sleep(PACE_S)
        model.eval()
        train = sum(losses) / len(losses)
        val, precision, recall, map50, map5095 = evaluate(model, vx, vy)
        values = (train, train * 1.5, train * 1.2, precision, recall, map50, map5095, val, val * 1.5, val * 1.2, lr,
                  lr, lr)  # fmt: skip
        header = "" if csv.exists() else ",".join(("epoch", "time", *KEYS)) + "\n"
        with open(csv, "a", encoding="utf-8") as f:
            f.write(header + ",".join(f"{v:.6g}" for v in (epoch + 1, time.time() - start, *values)) + "\n")
        print(f"epoch {epoch + 1}/{EPOCHS[scenario]} done", flush=True)


if __name__ == "__main__":
    main()

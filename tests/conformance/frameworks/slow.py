"""Slow but healthy runs that a stall detector must not take for a hang (argv: SCENARIO).

slow_phases: a plain torch loop that evaluates and saves a checkpoint as training loops print them
(`Evaluating...`, `saving checkpoint PATH`, `checkpoint saved PATH`); the eval and the save each take
PHASE_S, longer than the configured step budget (run-stalled's floor and busy_floor) and shorter than the
phase's (eval_floor, save_budget). The waits are I/O, so the processes are idle, as on a slow disk.
dataloader: a torch DataLoader whose Dataset reads each sample slowly (a network file system): every step
waits ITEM_S x BATCH for its batch, gaps longer than the floor but regular (the run's own cadence).
dataloader_slowdown: the same reads 4x slower after FAST_STEPS steps (the storage got slow): a step every 0.3 s,
then every 1.2 s for SLOW_STEPS steps, far under the stall floor: a throughput drop, not a stall.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch
from tiny import PLANS, Tiny, data

PHASE_S = float(os.environ.get("CONFORMANCE_PHASE_S", "25"))  # > busy_floor 20s, < eval_floor/save_budget 40s
ITEM_S, BATCH, LOADER_STEPS = 2.75, 4, 6  # 11 s a step, > floor 10s
FAST_ITEM_S, FAST_STEPS, SLOW_STEPS, SLOW_BATCH = 0.3 / 32, 80, 25, 32  # 24 s at 0.3 s a step, then 30 s at 1.2 s


class SlowReads(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Each sample read in item_s (the first fast_items in FAST_ITEM_S)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, item_s: float, fast_items: int = 0) -> None:
        self.x, self.y, self.item_s, self.fast_items = x, y, item_s, fast_items

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(FAST_ITEM_S if i < self.fast_items else self.item_s)  # one sample read from slow storage
        return self.x[i], self.y[i]


def step(model: Tiny, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    model.train()
    loss = model.loss(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss.item())


def slow_phases(model: Tiny, opt: torch.optim.Optimizer) -> None:
    x, y = data()
    vx, vy = data(512, seed=1)
    out = Path(os.environ.get("CONFORMANCE_OUT", "."))
    for s in range(1, 41):
        i = (s - 1) * 32 % len(x)
        print(f"step={s} loss={step(model, opt, x[i : i + 32], y[i : i + 32]):.4f}", flush=True)
        if s == 15:
            print("Evaluating...", flush=True)
            model.eval()
            with torch.no_grad():
                val = 0.0
                for b in range(5):  # 5 validation batches read from slow storage
                    time.sleep(PHASE_S / 5)
                    val += model.loss(vx[b * 100 : b * 100 + 100], vy[b * 100 : b * 100 + 100]).item() / 5
            print(f"step={s} val_loss={val:.4f}", flush=True)
        if s == 30:
            path = out / "checkpoint-30.pt"
            print(f"saving checkpoint {path}", flush=True)
            torch.save(model.state_dict(), path)
            time.sleep(PHASE_S)  # the upload to slow storage (a network file system, a bucket)
            print(f"checkpoint saved {path}", flush=True)


def dataloader(model: Tiny, opt: torch.optim.Optimizer) -> None:
    x, y = data(BATCH * LOADER_STEPS)
    loader = torch.utils.data.DataLoader(SlowReads(x, y, ITEM_S), batch_size=BATCH, num_workers=1)
    for s, (bx, by) in enumerate(loader, 1):
        print(f"step={s} loss={step(model, opt, bx, by):.4f}", flush=True)


def dataloader_slowdown(model: Tiny, opt: torch.optim.Optimizer) -> None:
    x, y = data(SLOW_BATCH * (FAST_STEPS + SLOW_STEPS))
    reads = SlowReads(x, y, 4 * FAST_ITEM_S, fast_items=SLOW_BATCH * FAST_STEPS)  # 4x slower past the fast items
    loader = torch.utils.data.DataLoader(reads, batch_size=SLOW_BATCH, num_workers=1)
    for s, (bx, by) in enumerate(loader, 1):
        print(f"step={s} loss={step(model, opt, bx, by):.4f}", flush=True)


def main() -> None:
    torch.manual_seed(0)
    model = Tiny(PLANS["healthy"])
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    scenarios = {"slow_phases": slow_phases, "dataloader": dataloader, "dataloader_slowdown": dataloader_slowdown}
    scenarios[sys.argv[1]](model, opt)


if __name__ == "__main__":
    main()

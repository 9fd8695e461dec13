"""Real faults raised for real in a plain torch loop (argv: FAULT): after 10 healthy steps,
oom_host allocates what the host cannot hold, disk_full saves a checkpoint to /dev/full (ENOSPC), hang
deadlocks on a lock it holds (alive, silent, idle: a futex wait for ever)."""

from __future__ import annotations

import sys
import threading

import torch
from tiny import PLANS, Tiny, data


def main() -> None:
    fault = sys.argv[1]
    torch.manual_seed(0)
    model = Tiny(PLANS["healthy"])
    x, y = data()
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    for step in range(1, 11):
        loss = model.loss(x[step * 32 : step * 32 + 32], y[step * 32 : step * 32 + 32])
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step={step} loss={loss.item():.4f}", flush=True)
    if fault == "oom_host":
        torch.empty(2**50, dtype=torch.float32)  # 4 PiB: DefaultCPUAllocator cannot allocate it
    elif fault == "disk_full":
        torch.save(model.state_dict(), "/dev/full")
    elif fault == "hang":
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()  # never returns


if __name__ == "__main__":
    main()

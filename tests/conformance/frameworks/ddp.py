"""torchrun with 2 processes on gloo (argv: SCENARIO): healthy DDP training, or a real fault:
collective_timeout (rank 1 stops joining the all-reduce; rank 0's gloo timeout fires), worker_killed
(rank 1 is SIGKILLed; torchrun reports its exitcode -9), rank_stuck (rank 1 blocks for ever at step 10 and
rank 0 waits in the all-reduce; the group's timeout is 30 minutes, so the watchdog must speak before gloo)."""

from __future__ import annotations

import datetime
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist
from tiny import PLANS, STEPS, Tiny, data


def main() -> None:
    scenario = sys.argv[1]
    timeout = datetime.timedelta(minutes=30) if scenario == "rank_stuck" else datetime.timedelta(seconds=5)
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(Tiny(PLANS.get(scenario, PLANS["healthy"])))
    x, y = data(seed=rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    for step in range(1, STEPS + 1):
        if step == 10 and rank == 1 and scenario == "worker_killed":
            os.kill(os.getpid(), signal.SIGKILL)
        i = step * 32 % len(x)
        loss = model.module.loss(x[i : i + 32], y[i : i + 32])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 10 and rank == 1 and scenario == "collective_timeout":
            time.sleep(60)  # rank 0 waits in the all-reduce below until its gloo timeout
        if step == 10 and rank == 1 and scenario == "rank_stuck":
            threading.Event().wait()  # never set: rank 1 stops calling the collective, alive and idle
        mean = loss.detach().clone()
        dist.all_reduce(mean)  # the loss averaged over the ranks, for the log
        if rank == 0:
            print(f"step {step} loss {mean.item() / 2:.4f}", flush=True)
    # both ranks done before either tears its gloo pairs down: a rank destroying its group while the other still
    # closes its side aborted at exit once in three CI runs (`terminate called without an active exception`)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

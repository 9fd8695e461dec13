"""A torch loop logged three more ways (argv: SCENARIO KIND): `accelerate` (Accelerator, and the
accelerate examples' logging format), `tensorboard` (torch.utils.tensorboard's SummaryWriter, whose event
files the agent watches), `wandb` (wandb offline: the agent reads its run directory's .wandb file)."""

from __future__ import annotations

import logging
import os
import sys

import torch
from tiny import EVAL_EVERY, STEPS, Tiny, data, plan


def main() -> None:
    kind, out = sys.argv[2], os.environ.get("CONFORMANCE_OUT", ".")
    p = plan()
    torch.manual_seed(0)
    model = Tiny(p)
    x, y = data(STEPS * 32, identical=p.identical)
    vx, vy = data(256, seed=1)
    opt = torch.optim.SGD(model.parameters(), lr=p.lr)
    log = logging.getLogger(__name__)
    if kind == "accelerate":
        from accelerate import Accelerator
        from accelerate.logging import get_logger

        logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
                            datefmt="%m/%d/%Y %H:%M:%S", level=logging.INFO, stream=sys.stdout)  # fmt: skip
        accelerator = Accelerator(cpu=True)
        model, opt = accelerator.prepare(model, opt)
        log = get_logger(__name__)
    if kind == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(os.path.join(out, "tb"), flush_secs=1)
    if kind == "wandb":
        import wandb

        run = wandb.init(project="conformance", mode="offline", dir=out, config={"lr": p.lr})
    for step in range(1, STEPS + 1):
        inner = getattr(model, "module", model)
        inner.train()
        loss = inner.loss(x[step * 32 - 32 : step * 32], y[step * 32 - 32 : step * 32])
        opt.zero_grad()
        (accelerator.backward(loss) if kind == "accelerate" else loss.backward())
        opt.step()
        val = None
        if step % EVAL_EVERY == 0:
            inner.eval()
            with torch.no_grad():
                val = inner.loss(vx, vy).item()
        if kind == "accelerate":
            log.info(f"step {step}: loss {loss.item():.4f}" + (f" val_loss {val:.4f}" if val is not None else ""))
        elif kind == "tensorboard":
            writer.add_scalar("train/loss", loss.item(), step)
            if val is not None:
                writer.add_scalar("val/loss", val, step)
            print(f"step {step} logged", flush=True)
        else:
            run.log({"train/loss": loss.item(), **({"val/loss": val} if val is not None else {})}, step=step)
    if kind == "tensorboard":
        writer.close()
    if kind == "wandb":
        run.finish()


if __name__ == "__main__":
    main()

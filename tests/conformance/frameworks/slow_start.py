"""A slow start that then learns (issue 39 item 4), a plain torch loop printing as such loops print (argv: SCENARIO).

A classifier over 4 classes whose learning rate warms up exponentially from 1e-6 over 600 of its 1,000 steps:
its val accuracy sits at chance (0.25) and its val loss at ln 4 for a few hundred steps, then both move. A
careful person does not stop it; a rule that judged "stuck at chance" or "no progress" from its first evals
would.
"""

from __future__ import annotations

import math

import torch


def main() -> None:
    torch.manual_seed(0)
    centers = torch.randn(4, 32) * 0.5
    yv = torch.randint(0, 4, (512,))
    xv = torch.randn(512, 32) + centers[yv]
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    warm = 600
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, 1e-5 * math.exp(s / warm * math.log(1e5))))
    for step in range(1, 1001):
        y = torch.randint(0, 4, (32,))
        x = torch.randn(32, 32) + centers[y]
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 10 == 0:
            print(f"step {step} | loss {loss.item():.4f} | lr {sched.get_last_lr()[0]:.2e}")
        if step % 25 == 0:
            with torch.no_grad():
                out = model(xv)
                val_loss = torch.nn.functional.cross_entropy(out, yv).item()
                acc = (out.argmax(1) == yv).float().mean().item()
            print(f"eval step {step} | val_loss {val_loss:.4f} | val_acc {acc:.4f}")


if __name__ == "__main__":
    main()

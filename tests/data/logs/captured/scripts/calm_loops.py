"""Healthy plain torch loops that a watchdog must not stop (issue 39 item 4), printed as a plain loop prints.

noisy: a linear regression on targets with unit noise, batch 8: once learned, the per-batch MSE is a band from
about 0.3 to 2.3 around 1.0 (a chi-square of 8 over 8), and now and then three batches in a row dip to its
bottom. slow: a classifier over 4 classes whose learning rate warms up from almost 0: val accuracy at chance
(0.25) for a few hundred steps, then climbing. fp16: a linear regression under torch.autocast(float16) and a
torch.amp.GradScaler (on CPU), Adam, its batches' input scale log-normal (some batches overflow at a scale others
take): the scale halves again and again in the first few hundred updates, to 4, while the loss falls 700 -> 1.
"""

import math
import sys

import torch


def noisy(seed: int) -> None:
    torch.manual_seed(seed)
    w = torch.randn(16, 1) * 0.3
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    for step in range(1, 401):
        x = torch.randn(8, 16)
        y = x @ w + torch.randn(8, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} | loss {loss.item():.4f}")


def slow(seed: int) -> None:
    torch.manual_seed(seed)
    centers = torch.randn(4, 32) * 0.5
    xv = torch.randn(512, 32)
    yv = torch.randint(0, 4, (512,))
    xv += centers[yv]
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


def fp16(seed: int) -> None:
    torch.manual_seed(seed)
    w = torch.randn(32, 1)
    model = torch.nn.Linear(32, 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    total = 0.0
    for step in range(1, 501):
        f = float(torch.exp(torch.randn(()) * 2))
        x = torch.randn(16, 32)
        with torch.autocast("cpu", dtype=torch.float16):
            out = model(x * f) / f
            loss = torch.nn.functional.mse_loss(out.float(), x @ w, reduction="sum")
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        total += loss.item()
        if step % 50 == 0:
            print(f"step {step} | loss {total / 50:.4f} | loss_scale {scaler.get_scale():g}")
            total = 0.0


if __name__ == "__main__":
    {"noisy": noisy, "slow": slow, "fp16": fp16}[sys.argv[1]](int(sys.argv[2]) if len(sys.argv) > 2 else 0)

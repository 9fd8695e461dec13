"""A plain torch loop printing in one of the ten common print styles (argv: SCENARIO STYLE)."""

from __future__ import annotations

import json
import logging
import sys

import torch
from tiny import EVAL_EVERY, STEPS, Tiny, data, plan

STYLES = {  # style -> (train line, eval line or None); provenance in docs/conformance.md
    "tutorial": ("Epoch [{e}/{E}], Step [{s}/{S}], Loss: {loss:.4f}", None),
    "quickstart": ("loss: {loss:>7f}  [{cur:>5d}/{n:>5d}]", None),
    "cifar": ("[{e}, {s:5d}] loss: {loss:.3f}", None),
    "mnist": ("Train Epoch: {e} [{cur}/{n} ({pct:.0f}%)]\tLoss: {loss:.6f}", None),
    "epoch_slash": ("Epoch {s}/{S}, Train Loss: {loss:.4f}, Test Loss: {val:.4f}", None),
    "pipes": ("step {s:4d} / {S:4d} | loss {loss:.4f} | lr {lr:.2e}", None),
    "step_loss": ("step {s} loss {loss:.4f}", None),
    "kv": ("step={s} loss={loss:.4f} lr={lr:g}", "step={s} val_loss={val:.4f}"),
    "logging": ("Epoch {e} Step {s}: loss={loss:.4f}", None),
    "json": ("", None),
}


def main() -> None:
    p, style = plan(), sys.argv[2]
    train_fmt, eval_fmt = STYLES[style]
    log = logging.getLogger("train")
    if style == "logging":
        logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(message)s", stream=sys.stdout)
    torch.manual_seed(0)
    model = Tiny(p)
    x, y = data(identical=p.identical, p=p)
    vx, vy = data(512, seed=1, p=p)
    if p.classes != 2:
        print(f"Number of classes: {p.classes}", flush=True)  # as a script states its task (issue 39: chance needs k)
    opt = torch.optim.SGD(model.parameters(), lr=p.lr)
    batch, n = 32, len(x)
    for s in range(1, STEPS + 1):
        i = (s - 1) * batch % n
        model.train()
        loss = model.loss(x[i : i + batch], y[i : i + batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            val = model.loss(vx, vy).item()
        f = {"e": 1 + s // 30, "E": 2, "s": s, "S": STEPS, "loss": loss.item(), "lr": p.lr, "cur": s * batch,
             "n": n, "pct": 100 * s * batch / n, "val": val}  # fmt: skip
        if style == "json":
            print(json.dumps({"step": s, "loss": loss.item(), "lr": p.lr}), flush=True)
        elif style == "logging":
            log.info(train_fmt.format(**f))
        else:
            print(train_fmt.format(**f), flush=True)
        if eval_fmt and s % EVAL_EVERY == 0:
            print(eval_fmt.format(**f), flush=True)


if __name__ == "__main__":
    main()

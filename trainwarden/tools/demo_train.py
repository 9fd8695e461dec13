"""A tiny stand-in for a training script: logs key=value metrics, then its loss turns NaN."""

from __future__ import annotations

import argparse
import math
import random
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--nan-at", type=int, default=25)
    p.add_argument("--interval", type=float, default=0.1, help="seconds between steps")
    args = p.parse_args()
    rng = random.Random(0)
    loss = 4.2
    print("loading dataset... done (1,024 shards)", flush=True)
    for step in range(1, args.steps + 1):
        loss = loss * (0.985 + rng.uniform(-0.01, 0.01))
        shown = math.nan if step >= args.nan_at else loss
        grad_norm = math.nan if step >= args.nan_at else rng.uniform(0.4, 1.6)
        print(
            f"step={step} loss={shown:.4f} grad_norm={grad_norm:.3f} lr=3e-4 tokens_per_s={rng.randint(11000, 13000)}",
            flush=True,
        )
        time.sleep(args.interval)


if __name__ == "__main__":
    main()

"""Secret masking: its cost per log line against the agent's own handling of the same line.

handling: the agent's parser per line (format detection, metric parsing, name normalisation,
  notable-line tagging), as `bench/agent_costs.py parse` measures it.
masking: `redact_text` with a run's secrets (10 environment values), on every line of the same
  mix -- more than the agent does (it masks only the text it publishes: notable lines, tracebacks,
  failure tails), so this is the worst case. Also on lines that all hold a trigger word (key, token,
  a URL), which take the full pattern table, and on lines that hold secrets.
Target: masking every line costs at most the handling (ratio <= 1).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agent_costs import training_log
from trainwarden.agent.formats import parse_metrics
from trainwarden.agent.parse import tag_of
from trainwarden.core.metrics import normalise
from trainwarden.core.redact import redact_text

SECRETS = [f"value-of-secret-{i:02d}-" + "x" * 20 for i in range(10)]
TRIGGERED = [
    "INFO tokenizer loaded, max_tokens=2048, vocab 50257",
    "saving to s3://bucket/ckpt/step_100.pt with key prefix runs/exp01",
    "Authorization header missing for https://hub.example.com/api/models",
    "step=100 loss=2.31 tokens_per_s=12000 secret sauce: none",
]
LEAKY = [
    "wandb: using key wandb_v1_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "HF_TOKEN=hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123 python train.py --lr 3e-4",
    f"ValueError: bad credentials {SECRETS[3]}",
    "--api-key sekrit-value --token=abc123 --lr 3",
]


def handle(line: str) -> None:
    metrics = parse_metrics(line)
    if metrics:
        normalise(metrics)
    else:
        tag_of(line)


def mask(line: str) -> None:
    redact_text(line, SECRETS)


def ns_per_line(fns: list[tuple[Callable[[str], None], list[str]]], repeats: int, chunk: int = 500) -> list[float]:
    """Best ns per line of each (fn, lines), over short chunks measured in turns: on a loaded machine the
    best chunk is the one nothing interrupted, and all of them see the same load."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for start_at in range(0, min(len(lines) for _, lines in fns), chunk):
            for i, (fn, lines) in enumerate(fns):
                part = lines[start_at : start_at + chunk]
                start = time.perf_counter()
                for line in part:
                    fn(line)
                best[i] = min(best[i], (time.perf_counter() - start) / len(part))
    return [b * 1e9 for b in best]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lines", type=int, default=20_000)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="tw-bench-redact-") as d:
        path = Path(d) / "train.log"
        training_log(path, args.lines)
        mix = path.read_text().splitlines()
    triggered = TRIGGERED * (len(mix) // len(TRIGGERED))
    leaky = LEAKY * (len(mix) // len(LEAKY))
    handling, masking, with_triggers, with_secrets = ns_per_line(
        [(handle, mix), (mask, mix), (mask, triggered), (mask, leaky)], args.repeats
    )
    print(f"redact: {len(mix):,} log lines of mixed formats, best of {args.repeats}, {len(SECRETS)} run secrets")
    print(f"  agent handling per line:            {handling:8,.0f} ns")
    print(f"  masking per line (every line):      {masking:8,.0f} ns   ratio {masking / handling:.2f} (target <= 1)")
    for name, cost in (("with trigger words", with_triggers), ("holding secrets", with_secrets)):
        print(f"  masking per line {name + ':':19s} {cost:8,.0f} ns   ratio {cost / handling:.2f}")


if __name__ == "__main__":
    main()

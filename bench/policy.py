"""Policy evaluation: cost per event stays flat as a run's history grows, and throughput vs JSON decoding.

1. Flat cost: time for the worker (process_run on a real Redis) to evaluate 10,000 new events with
   the default policy when the run already holds 10,000 events vs 1,000,000. Target: ratio <= 1.5.
2. Throughput: events/s through the worker's pure step (strict decode + fold + default policy)
   vs json.loads of the same stored bytes alone. Target: ratio >= 0.25.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import tempfile
import time
from pathlib import Path

from harness import best_of, private_redis
from trainwarden.events.codec import decode, encode
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore
from trainwarden.remote.stop import LocalTmuxController
from trainwarden.workers import context
from trainwarden.workers.checkpoint import Checkpoint
from trainwarden.workers.context import WorkerContext
from trainwarden.workers.evaluate import evaluate_entries
from trainwarden.workers.policy_source import PolicySource
from trainwarden.workers.process import process_run

PAGE = 2000


def training_events(run: str, start: int, count: int) -> list[Event]:
    """A healthy run's events: metrics with noise, an eval every 100, a GPU sample every 10."""
    rnd = random.Random(start)
    out = []
    for i in range(start, start + count):
        ts = 1_800_000_000.0 + i
        if i % 10 == 0:
            out.append(make_event("gpu", run=run, host="gpu1", producer="gpu1/nvml", seq=i, ts=ts,
                                  data={"util": 95, "temp": 70}))  # fmt: skip
            continue
        data = {
            "step": i,
            "loss": 1.0 + 3.0 * math.exp(-i / 5000) + rnd.uniform(-0.02, 0.02),
            "grad_norm": rnd.uniform(0.5, 2.0),
            "lr": 3e-4,
            "tokens_per_s": 12000 + rnd.uniform(-200, 200),
        }
        if i % 100 == 1:
            data["val_loss"] = 1.2 + 3.0 * math.exp(-i / 5000)
        out.append(make_event("metric", run=run, host="gpu1", producer="gpu1/log", seq=i, ts=ts, data=data))
    return out  # fmt: skip


def fill(store: EventStore, run: str, start: int, count: int) -> None:
    for chunk in range(start, start + count, 5000):
        store.append(training_events(run, chunk, min(5000, start + count - chunk)))


def prepare(store: EventStore, run: str, history: int) -> None:
    """A run whose log holds `history` events, all evaluated: the checkpoint sits at its end."""
    fill(store, run, 1, history)
    process_run(run, [])


def time_new(store: EventStore, run: str, *, start: int, new: int) -> float:
    """Seconds for one job to evaluate `new` events appended to the run."""
    fill(store, run, start, new)
    began = time.perf_counter()
    summary = process_run(run, [])
    elapsed = time.perf_counter() - began
    assert summary["events"] >= new, summary
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--small", type=int, default=10_000)
    p.add_argument("--large", type=int, default=1_000_000)
    p.add_argument("--new", type=int, default=10_000)
    p.add_argument("--throughput-events", type=int, default=200_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--throughput-repeats", type=int, default=5, help="a few seconds each; a busy box needs more")
    args = p.parse_args()

    stored = [(f"{i}-0", encode(e)) for i, e in enumerate(training_events("bench-tp", 1, args.throughput_events), 1)]
    # The input stands for a Redis reply, not for the worker's heap: keep the garbage collector from
    # walking it on every collection (a worker holds one page at a time).
    gc.collect()
    gc.freeze()

    def json_only() -> int:
        for _, item in stored:
            json.loads(item)
        return len(stored)

    def evaluate() -> int:  # page by page, as the worker reads them
        cp = Checkpoint()
        policy = PolicySource(host="bench").policy
        for k in range(0, len(stored), PAGE):
            entries = [(sid, decode(item, "bench-tp")) for sid, item in stored[k : k + PAGE]]
            evaluate_entries(policy, cp, entries, run="bench-tp", host="bench", now=0.0)
        return len(stored)

    # Measured alternately, so that a busy machine slows both sides alike; best of each.
    json_eps = eval_eps = 0.0
    for _ in range(args.throughput_repeats):
        json_eps = max(json_eps, best_of(1, lambda: None, json_only))
        eval_eps = max(eval_eps, best_of(1, lambda: None, evaluate))

    with private_redis() as server, tempfile.TemporaryDirectory() as tmp:
        store = EventStore(server.client(), keys=Keys())
        context.install(WorkerContext(store=store, host="bench", policies=PolicySource(host="bench"),
                                      controller=LocalTmuxController(), evidence_dir=Path(tmp)))  # fmt: skip
        began = time.perf_counter()
        prepare(store, "bench-small", args.small)
        prepare(store, "bench-large", args.large)
        setup_s = time.perf_counter() - began
        small = large = math.inf
        for r in range(args.repeats):
            small = min(small, time_new(store, "bench-small", start=args.small + 1 + r * args.new, new=args.new))
            large = min(large, time_new(store, "bench-large", start=args.large + 1 + r * args.new, new=args.new))
    print(f"policy: default policy, best of {args.repeats}")
    print(f"  flat cost: {args.new:,} new events evaluated by process_run (setup {setup_s:.0f}s)")
    print(f"    run holding {args.small:>9,} events: {small * 1000:8.0f} ms ({args.new / small:10,.0f} events/s)")
    print(f"    run holding {args.large:>9,} events: {large * 1000:8.0f} ms ({args.new / large:10,.0f} events/s)")
    print(f"    ratio large/small: {large / small:.2f} (target <= 1.5)")
    print(f"  throughput over {args.throughput_events:,} events, in memory, best of {args.throughput_repeats}:")
    print(f"    json.loads alone:                 {json_eps:12,.0f} events/s")
    print(f"    decode + fold + default policy:   {eval_eps:12,.0f} events/s")
    print(f"    ratio: {eval_eps / json_eps:.2f} (target >= 0.25)")


if __name__ == "__main__":
    main()

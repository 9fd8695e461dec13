"""/status at a few hundred live runs: the bot's reply built end to end (the handler the slash command calls: run
names, every run's view, the urgency order, the shown lines' GPU samples, the text) against a raw baseline measured
in the same run, one pipelined HGETALL of the same runs' view keys (the least any reader of the views must do).

A private redis-server holds RUNS runs (a launch, `--history` metric events each, a GPU sample every tenth event);
a first /status saves every view. Then, as with live runs sending once a second, each round appends one metric event
to every run (so every view has moved, as it has between two /status in a real lab) and times the reply.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from harness import percentile, private_redis
from trainwarden.bot.config import BotConfig
from trainwarden.bot.handlers import Handlers
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore


def event(kind: str, run: str, seq: int, **data: object) -> Event:
    return make_event(kind, run=run, host="gpu1", producer=f"gpu1/log/{run}/g0", seq=seq, data=data)


def history(run: str, n: int) -> list[Event]:
    out = [event(t.RUN_LAUNCHED, run, 1, command=["python", "train.py"], total_steps=10_000)]
    for s in range(2, n + 2):
        out.append(event(t.METRIC, run, s, step=s, loss=2.0 - s / 10_000, lr=3e-4, grad_norm=1.0))
        if s % 10 == 0:
            out.append(make_event(t.GPU, run=run, host="gpu1", producer=f"gpu1/gpu/{run}", seq=s, data={"util": 87}))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--runs", type=int, default=400)
    p.add_argument("--history", type=int, default=200, help="metric events per run before the rounds")
    p.add_argument("--rounds", type=int, default=50)
    args = p.parse_args()
    runs = [f"run{i:04d}" for i in range(args.runs)]
    with private_redis() as server:
        client = server.client()
        store = EventStore(client, keys=Keys())
        for run in runs:
            store.append(history(run, args.history))
        handlers = Handlers(store=store, config=BotConfig(), host="bench", fleet=None, launcher=None)
        started = time.perf_counter()
        first = handlers.command("status", "", user="U1")
        first_s = time.perf_counter() - started
        assert first.text.count("\n") >= 15, first.text
        if first.then is not None:
            first.then()
        ours: list[float] = []
        raw: list[float] = []
        after: list[float] = []
        views = [store.keys.view(run) for run in runs]
        for r in range(args.rounds):
            seq = args.history + 10 + r
            for run in runs:  # one new event per run: every view moved since the last /status
                store.append([event(t.METRIC, run, seq, step=seq, loss=1.5, lr=3e-4, grad_norm=1.0)])
            started = time.perf_counter()
            pipe = client.pipeline(transaction=False)
            for key in views:
                pipe.hgetall(key)
            replies = pipe.execute()
            raw.append(time.perf_counter() - started)
            assert all(replies)
            started = time.perf_counter()
            reply = handlers.command("status", "", user="U1")
            ours.append(time.perf_counter() - started)
            assert reply.text.splitlines()[0].startswith("run0000@gpu1"), reply.text
            started = time.perf_counter()
            if reply.then is not None:  # as the bot does once the reply is posted: the moved views saved
                reply.then()
            after.append(time.perf_counter() - started)
    ms = [1000 * v for v in ours]
    base = [1000 * v for v in raw]
    print(f"/status over {args.runs} live runs ({args.history} events each, one new event per run per round), "
          f"{args.rounds} rounds", file=sys.stderr)  # fmt: skip
    print(f"  first /status (no view saved yet):   {1000 * first_s:8.1f} ms")
    rows = (("/status reply built (handler)", ms), ("then, after the reply: views saved", [1000 * v for v in after]),
            ("raw: pipelined HGETALL of the views", base))  # fmt: skip
    for label, values in rows:
        print(f"  {label + ':':37} p50 {statistics.median(values):8.1f} ms   p99 {percentile(values, 0.99):8.1f} ms")
    print(f"  ratio (p50 /status / p50 raw):        {statistics.median(ms) / statistics.median(base):.1f}x")
    print(f"  target: /status p99 <= 300 ms: {'met' if percentile(ms, 0.99) <= 300 else 'NOT met'}")


if __name__ == "__main__":
    main()

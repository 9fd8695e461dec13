"""Redis memory per metric event: the stored form through the real append path vs the full envelope.

Typical agent metric events (a log-line producer, step/loss/lr/grad_norm) are appended through
the real store (append script: run log, producer marks, feed entry, runs index) into a fresh
redis-server, as the agent does for many runs at once (one event per run per flush, the worst
case for the feed). Reported: Redis `used_memory` growth per event with the feed as it is and
after the feed is trimmed (the dispatcher trims what every group acknowledged), and
`MEMORY USAGE` of the run streams. Baseline, measured in the same run: the same events XADDed as
the full self-contained JSON envelope (what trainwarden stored before the compact form).
Target: <= 150 bytes per typical metric event on average.
"""

from __future__ import annotations

import argparse
import time

from harness import private_redis
from trainwarden.events.codec import encode_full
from trainwarden.events.envelope import make_event
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore


def typical(run: str, i: int) -> object:
    return make_event("metric", run=run, host="gpu-node-07", producer=f"gpu-node-07/log/{run}/g0", seq=4096 + i * 83,
                      data={"step": 1000 + i, "loss": round(2.5 - i * 1e-5, 6), "lr": 3e-4, "grad_norm": 0.8734},
                      ts=time.time())  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--events", type=int, default=200_000, help="in total, spread evenly over the runs")
    args = p.parse_args()
    per_run = args.events // args.runs
    runs = [f"llama-7b-sweep-lr{r:03d}" for r in range(args.runs)]
    with private_redis() as server:
        client = server.client()
        store = EventStore(client, keys=Keys())

        def used() -> int:
            return int(client.info("memory")["used_memory"])

        base = used()
        for i in range(per_run):
            store.append_count([typical(run, i) for run in runs])  # one event per run per flush
        n = per_run * len(runs)
        with_feed = (used() - base) / n
        client.delete(store.keys.feed())
        ours = (used() - base) / n
        stream = sum(int(client.memory_usage(store.keys.log(run), samples=0)) for run in runs) / n

        client.flushall()
        base = used()
        for i in range(per_run):
            pipe = client.pipeline(transaction=False)
            for run in runs:
                pipe.xadd(store.keys.log(run), {"e": encode_full(typical(run, i))})
            pipe.execute()
        full = (used() - base) / n
    print(f"memory: {n} typical metric events over {len(runs)} runs, one event per run per append")
    print(f"  stored form, whole store (log + marks + runs), feed trimmed: {ours:7.1f} bytes/event")
    print(f"  same, before the feed is trimmed:                           {with_feed:7.1f} bytes/event")
    print(f"  MEMORY USAGE of the run streams:                            {stream:7.1f} bytes/event")
    print(f"  baseline: full JSON envelope, bare XADD:                    {full:7.1f} bytes/event")
    print(f"  ratio stored/baseline: {ours / full:.2f}  (target: <= 150 bytes/event)")
    print(f"  per 1,000,000 events: {ours * 1e6 / 2**20:.0f} MiB (baseline {full * 1e6 / 2**20:.0f} MiB)")


if __name__ == "__main__":
    main()

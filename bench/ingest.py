"""Ingest: events/s through the agent's publisher vs raw redis-py pipelined XADD of the same payloads.

Both sides send the same metric events for one run in batches of the same size; the raw side
JSON-encodes the same envelopes and XADDs them without idempotency, feed or run index.
Target: ratio >= 0.5.
"""

from __future__ import annotations

import argparse
import json

from harness import best_of, private_redis
from trainwarden.agent.publisher import Publisher
from trainwarden.events.envelope import make_event
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()

    events = [
        make_event("metric", run="bench-ingest", host="gpu1", producer="gpu1/log/bench-ingest/g0", seq=i,
                   data={"step": i, "loss": 2.0 + 1.0 / i, "grad_norm": 0.8, "lr": 3e-4, "tokens_per_s": 12000.0})
        for i in range(1, args.events + 1)
    ]  # fmt: skip
    envelopes = [
        {"id": e.id, "type": e.type, "v": e.v, "run": e.run, "host": e.host, "ts": e.ts, "seq": e.seq, "data": e.data}
        for e in events
    ]
    with private_redis() as server:
        client = server.client()
        store = EventStore(client, keys=Keys())
        key = store.keys.log("bench-ingest")

        def raw() -> int:
            for start in range(0, len(envelopes), args.batch):
                pipe = client.pipeline(transaction=False)
                for env in envelopes[start : start + args.batch]:
                    pipe.xadd(key, {"e": json.dumps(env, separators=(",", ":"))})
                pipe.execute()
            return len(envelopes)

        def ours() -> int:
            publisher = Publisher(store, max_batch=args.batch)
            for start in range(0, len(events), args.batch):
                publisher.publish(events[start : start + args.batch])
                publisher.flush()
            assert publisher.appended == len(events)
            return len(events)

        raw_eps = best_of(args.repeats, client.flushall, raw)
        our_eps = best_of(args.repeats, client.flushall, ours)
    print(f"ingest: {args.events} metric events, batches of {args.batch}, best of {args.repeats}")
    print(f"  raw pipelined XADD:     {raw_eps:12,.0f} events/s")
    print(f"  trainwarden publisher:  {our_eps:12,.0f} events/s (idempotent, feed + run index)")
    print(f"  ratio: {our_eps / raw_eps:.2f} (target >= 0.5)")


if __name__ == "__main__":
    main()

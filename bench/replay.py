"""Replay: events/s rebuilding a run's state from a 1,000,000-event log vs raw XRANGE + json decode.

The raw side pages through the stream with XRANGE and json-decodes each entry; trainwarden's
side pages the same way, decodes strictly into Events and folds them into a RunState.
Target: ratio >= 0.5.
"""

from __future__ import annotations

import argparse
import json
import time

from harness import best_of, private_redis
from trainwarden.events.envelope import make_event
from trainwarden.events.keys import Keys
from trainwarden.events.projection import fold
from trainwarden.events.store import EventStore, Malformed

PAGE = 10_000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    run = "bench-replay"
    with private_redis() as server:
        client = server.client()
        store = EventStore(client, keys=Keys())
        start = time.perf_counter()
        before = int(client.info("memory")["used_memory"])
        for chunk in range(0, args.events, 5000):
            store.append([
                make_event("metric", run=run, host="gpu1", producer="gpu1/log/bench-replay/g0", seq=i,
                           data={"step": i, "loss": 2.0 + 1.0 / i, "grad_norm": 0.8, "lr": 3e-4})
                for i in range(chunk + 1, min(chunk + 5000, args.events) + 1)
            ])  # fmt: skip
        load_s = time.perf_counter() - start
        used = int(client.info("memory")["used_memory"]) - before
        key = store.keys.log(run)

        def raw() -> int:
            n = 0
            lo = "-"
            while True:
                entries = client.xrange(key, min=lo, max="+", count=PAGE)
                if not entries:
                    return n
                for _sid, fields in entries:
                    json.loads(fields[b"e"])
                    n += 1
                if len(entries) < PAGE:
                    return n
                lo = "(" + entries[-1][0].decode()

        def ours() -> int:
            state = fold(e for _, e in store.iter_run(run, page=PAGE) if not isinstance(e, Malformed))
            assert state.event_count == args.events
            return state.event_count

        raw_eps = best_of(args.repeats, lambda: None, raw)
        our_eps = best_of(args.repeats, lambda: None, ours)
    print(f"replay: one run of {args.events:,} metric events (loaded in {load_s:.1f}s), best of {args.repeats}")
    print(f"  Redis memory: {used / args.events:.0f} bytes/event (log + feed + marks)")
    print(f"  raw XRANGE + json.loads:        {raw_eps:12,.0f} events/s")
    print(f"  trainwarden decode + fold:      {our_eps:12,.0f} events/s")
    print(f"  ratio: {our_eps / raw_eps:.2f} (target >= 0.5)")


if __name__ == "__main__":
    main()

"""Notifications: latency from an anomaly's append to the request at a local Slack server, and
throughput of the notifier vs a bare XREAD + HTTP POST loop doing the same posts.

The notifier is the real one (feed consumer group, noise-control stages, Block Kit, exactly-once
intent/sent events, checkpoint, ack) posting through the real Slack sink (WebClient) to the
tests' local Web API server. The bare loop XREADs one stream of the same anomaly envelopes and
posts each with the same WebClient and the same payload (text, blocks, metadata, rendered
beforehand), so the ratio is the cost of the notifier's own work. Target: throughput ratio >= 0.5.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

from harness import private_redis
from slack_sdk import WebClient
from trainwarden.bot.blocks import notice_blocks
from trainwarden.bot.notifier import Notifier
from trainwarden.bot.sink import Message
from trainwarden.bot.stages import NotifyState, Pipeline, select
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore

from tests.helpers import metric, wait_for
from tests.slack_api import SlackAPI, sink_for


def anomaly(run: str, seq: int, rule: str):
    data = {"rule": rule, "reason": f"{rule} fired at step {seq}", "severity": "warning",
            "values": {"loss": 9.5, "step": seq}, "run_host": "gpu1", "remedy": "lower the lr"}  # fmt: skip
    return make_event(t.ANOMALY_OPENED, run=run, host="w", producer=f"eval/{run}", seq=seq, data=data)


def notifier(store: EventStore, api: SlackAPI) -> Notifier:
    n = Notifier(store=store, sink=sink_for(api), consumer="bench", channel="C1", host="bench",
                 pipeline=Pipeline(flap_threshold=3, flap_window_s=3600))  # fmt: skip
    n.reader.ensure_group()
    return n


def seed_metrics(store: EventStore, runs: list[str]) -> None:
    """50 metrics per run, for the trends (the notifier folds them into the run's view on its first anomaly)."""
    for run in runs:
        store.append([metric(run, i, step=i, loss=2.0 + 1 / i) for i in range(1, 51)])


def latency(client, n_events: int) -> list[float]:
    """One anomaly at a time (an idle system): append -> chat.postMessage arriving at the server."""
    store = EventStore(client, keys=Keys())
    api = SlackAPI()
    runs = [f"lat{i:02d}" for i in range(10)]
    seed_metrics(store, runs)
    n = notifier(store, api)
    stop = threading.Event()
    thread = threading.Thread(target=n.run, kwargs={"stop": stop}, daemon=True)
    thread.start()
    out = []
    for i in range(n_events):
        event = anomaly(runs[i % len(runs)], i + 1, f"rule{i}")
        start = time.perf_counter()
        store.append_one(event)
        arrived = wait_for(lambda k=event.id: api.post_times.get(k), timeout=30, interval=0.0002)
        out.append(arrived - start)
    stop.set()
    thread.join()
    api.close()
    return out


def throughput(client, n_events: int, runs: int) -> tuple[float, float]:
    per_run = n_events // runs
    names = [f"tp{r:03d}" for r in range(runs)]
    batches = [[anomaly(run, i + 1, f"rule{i}") for i in range(per_run)] for run in names]

    # trainwarden: the notifier drains what is there
    client.flushall()
    store = EventStore(client, keys=Keys())
    seed_metrics(store, names)
    for batch in batches:
        store.append(batch)
    api = SlackAPI()
    n = notifier(store, api)
    start = time.perf_counter()
    while n.step() > 0:
        pass
    ours = len(api.messages) / (time.perf_counter() - start)
    assert len(api.messages) == n_events, len(api.messages)
    api.close()

    # bare: XREAD one stream of the same envelopes, POST each with the same payload (text, blocks, metadata)
    payloads = {}
    for batch in batches:
        for e in batch:
            notice = select(NotifyState(), e)
            assert notice is not None
            blocks = notice_blocks(notice, state=NotifyState(), trend=("loss", [2.0] * 20), snooze_s=3600)
            payloads[e.id] = {"text": notice.text, "blocks": blocks, "metadata": Message(
                key=e.id, run=e.run, channel="C1", text="").metadata}  # fmt: skip
    client.flushall()
    key = "bare:stream"
    pipe = client.pipeline(transaction=False)
    for batch in batches:
        for e in batch:
            pipe.xadd(key, {"e": json.dumps({"id": e.id, "run": e.run, "data": e.data})})
    pipe.execute()
    api = SlackAPI()
    web = WebClient(token="xoxb-bench", base_url=api.url, retry_handlers=[])
    start = time.perf_counter()
    last = "0-0"
    while True:
        reply = client.xread({key: last}, count=500)
        if not reply:
            break
        for sid, fields in reply[0][1]:
            env = json.loads(fields[b"e"])
            web.chat_postMessage(channel="C1", **payloads[env["id"]])
            last = sid
    bare = len(api.messages) / (time.perf_counter() - start)
    api.close()
    return ours, bare


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--events", type=int, default=1000)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    with private_redis() as server:
        client = server.client()
        lat = sorted(latency(client, args.events))
        best_ours = best_bare = 0.0
        for _ in range(args.repeats):
            ours, bare = throughput(client, args.events, args.runs)
            best_ours, best_bare = max(best_ours, ours), max(best_bare, bare)
    p50 = statistics.median(lat) * 1000
    p99 = lat[int(len(lat) * 0.99) - 1] * 1000
    print(f"notify: {args.events} anomalies; throughput over {args.runs} runs, best of {args.repeats}")
    print(f"  latency append -> Slack request: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    print(f"  bare XREAD + POST loop:  {best_bare:8,.0f} messages/s")
    print(f"  trainwarden notifier:    {best_ours:8,.0f} messages/s (stages, blocks, exactly-once, checkpoint)")
    print(f"  ratio: {best_ours / best_bare:.2f} (target >= 0.5)")


if __name__ == "__main__":
    main()

"""The load benchmark's parts (bench/load.py): processes, CPU accounting, what is measured and how.

Pure helpers (counts, slopes), the processes the benchmark starts (`Procs`, and `Neighbour`: a
process keeping one core busy, as other work on a shared machine does), and the measurements read
from Redis (feed lag, evaluated events, memory, NaN -> STOP decision latency).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from harness import sid_seconds
from rq import Queue, Worker
from trainwarden.agent.publisher import Publisher
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.feed import DISPATCH_GROUP, NOTIFY_GROUP, GroupReader
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore

from trainwarden.tools.simulate import Shard, SimSpec, metric_data, nan_onsets, run_name

REPO = Path(__file__).resolve().parent.parent
QUEUE = "trainwarden"  # the RQ queue the daemons use by default
KEYS = Keys()
TYPE_COUNT_METRIC = re.compile(rb'"type_counts": \{[^}]*"metric": (\d+)')

# -- pure helpers -------------------------------------------------------------------------------


def metric_count(run_json: bytes | None) -> int:
    """Metric events a checkpoint has folded, read from its run state without parsing all of it."""
    if not run_json:
        return 0
    match = TYPE_COUNT_METRIC.search(run_json)
    return int(match.group(1)) if match else 0


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x (how many seconds the lag grows per second)."""
    if len(points) < 2:
        return 0.0
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def doubling_ratios(throughput: dict[int, float]) -> list[tuple[int, int, float, float]]:
    """(k, 2k, T(2k)/T(k), T(2k)/(2 T(k))) for each doubling of workers measured."""
    out = []
    for k in sorted(throughput):
        if 2 * k in throughput and throughput[k] > 0:
            speedup = throughput[2 * k] / throughput[k]
            out.append((k, 2 * k, speedup, speedup / 2))
    return out


@dataclass(slots=True)
class Row:
    runs: int
    rate: float
    workers: int
    offered_eps: float = 0.0
    published_eps: float = 0.0
    processed_eps: float = 0.0
    lag_mean_s: float = 0.0
    lag_max_s: float = 0.0
    lag_end_s: float = 0.0  # at the end of the window
    lag_growth: float = 0.0  # seconds of lag gained per second over the window (0: steady)
    queue_mean: float = 0.0
    queue_max: int = 0
    stop_latency_s: list[float] = field(default_factory=list)
    stored_latency_s: list[float] = field(default_factory=list)  # of each, until the NaN event was in Redis
    evidence_s: list[float] = field(default_factory=list)  # STOP decision -> its evidence pack's result
    stops_asked: int = 0
    events_stored: int = 0
    used_memory_per_event: float = 0.0
    store_memory_per_event: float = 0.0
    stream_bytes_per_entry: float = 0.0
    window_bytes_per_event: float = 0.0  # used_memory growth over the window / events stored in it
    window_rq_bytes_per_event: float = 0.0  # of which RQ's keys
    window_feed_bytes_per_event: float = 0.0  # of which the feed
    window_stream_bytes_per_event: float = 0.0  # of which the run streams
    window_checkpoint_bytes_per_event: float = 0.0  # of which the checkpoints
    cpu: dict[str, float] = field(default_factory=dict)  # cores, over the window
    machine_busy: float = 0.0  # share of all cores busy over the window
    windows: int = 1  # measuring windows whose NaN -> STOP latencies are in stop_latency_s

    @property
    def worker_ms_per_event(self) -> float:
        return 1000 * self.cpu.get("worker", 0.0) / self.processed_eps if self.processed_eps else math.nan

    @property
    def keeps_up(self) -> bool:
        """Processed what was offered, and the lag did not keep growing: a fitted growth of over 0.15 s a
        second that the lag at the end of the window confirms (the window is short, the lag noisy)."""
        growing = self.lag_growth > 0.15 and self.lag_end_s > self.lag_mean_s + 0.5
        return not growing and self.processed_eps >= 0.85 * self.offered_eps

    @property
    def bottleneck(self) -> str:
        redis_cpu = self.cpu.get("redis", 0.0)
        if redis_cpu >= 0.9:
            return f"Redis (one core: {redis_cpu:.2f})"
        if self.cpu.get("dispatcher", 0.0) >= 0.9:
            return f"dispatcher (one core: {self.cpu['dispatcher']:.2f})"
        if self.machine_busy >= 0.85:
            share = ", ".join(f"{k} {v:.2f}" for k, v in sorted(self.cpu.items(), key=lambda kv: -kv[1]))
            return f"CPU: all {os.cpu_count()} cores busy ({share} cores)"
        if self.keeps_up:
            return "none"
        return (f"the workers: {self.workers} process(es) at {self.cpu.get('worker', 0.0):.2f} cores, waiting on "
                f"Redis round trips while {1 - self.machine_busy:.0%} of the CPU is idle: more workers")  # fmt: skip


# -- processes ----------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """CPU of a process and every descendant alive now, plus what its reaped children used."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        stats[int(entry.name)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        if p in stats:
            f = stats[p]
            total += sum(int(x) for x in f[11:15]) / tick  # utime stime cutime cstime
        todo.extend(children.get(p, []))
    return total


def machine_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of all cores."""
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts) - idle, sum(parts)


class Procs:
    def __init__(self, config: Path, work: Path) -> None:
        self.config = config
        self.work = work
        self.started: dict[str, list[subprocess.Popen[bytes]]] = {}

    def start(self, role: str, *args: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "trainwarden", "--config", str(self.config), "--log-level", "WARNING", *args]
        with open(self.work / f"{role}.log", "ab") as sink:
            proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=REPO)  # fmt: skip
        self.started.setdefault(role, []).append(proc)
        return proc

    def cpu(self) -> dict[str, float]:
        return {role: sum(cpu_seconds(p.pid) for p in procs) for role, procs in self.started.items()}

    def stop(self, role: str) -> None:
        procs = self.started.pop(role, [])
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def stop_all(self) -> None:
        for role in list(self.started):
            self.stop(role)


class Neighbour:
    """Other work sharing the machine: a process spinning on one core while it runs (`--neighbour`)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.proc is None:
            self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


# -- measuring ----------------------------------------------------------------------------------


def feed_lag(client: redis.Redis, now: float) -> float:
    """Age of the oldest feed entry the dispatch group has not finished: pending, or not read yet."""
    feed = KEYS.feed()
    oldest: float | None = None
    summary = client.xpending(feed, DISPATCH_GROUP)
    if summary["pending"]:
        oldest = sid_seconds(summary["min"])
    for info in client.xinfo_groups(feed):
        if info["name"].decode() == DISPATCH_GROUP:
            unread = client.xrange(feed, min=f"({info['last-delivered-id'].decode()}", max="+", count=1)
            if unread:
                first = sid_seconds(unread[0][0])
                oldest = first if oldest is None else min(oldest, first)
    return 0.0 if oldest is None else max(0.0, now - oldest)


def processed(client: redis.Redis, runs: list[str]) -> int:
    pipe = client.pipeline(transaction=False)
    for run in runs:
        pipe.hget(KEYS.cursor(run), "run")
    return sum(metric_count(raw) for raw in pipe.execute())


def trainwarden_memory(client: redis.Redis) -> tuple[int, int, int]:
    """(bytes of every trainwarden key, bytes of the run streams, entries in them)."""
    total = streams = entries = 0
    keys = list(client.scan_iter(match=f"{KEYS.namespace}:*", count=1000))
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key, samples=0)
    sizes = pipe.execute()
    pipe = client.pipeline(transaction=False)
    logs = [(key, size) for key, size in zip(keys, sizes, strict=True) if key.endswith(b":log")]
    for key, _ in logs:
        pipe.xlen(key)
    for (_, size), length in zip(logs, pipe.execute(), strict=True):
        streams += size or 0
        entries += length
    total = sum(size or 0 for size in sizes)
    return total, streams, entries


@dataclass(frozen=True, slots=True)
class MemorySample:
    used: int  # used_memory
    entries: int  # entries in the run streams
    rq: int  # MEMORY USAGE of RQ's keys
    feed: int  # MEMORY USAGE of the feed
    streams: int  # MEMORY USAGE of the run streams
    checkpoints: int  # MEMORY USAGE of the workers' checkpoints (they grow until the windows are full)

    def per_event(self, start: MemorySample, row: Row) -> None:
        """Into `row`: the growth since `start` per run-stream entry stored in between, and its parts."""
        stored = max(1, self.entries - start.entries)
        row.window_bytes_per_event = (self.used - start.used) / stored
        row.window_rq_bytes_per_event = (self.rq - start.rq) / stored
        row.window_feed_bytes_per_event = (self.feed - start.feed) / stored
        row.window_stream_bytes_per_event = (self.streams - start.streams) / stored
        row.window_checkpoint_bytes_per_event = (self.checkpoints - start.checkpoints) / stored


def memory_sample(client: redis.Redis, runs: list[str]) -> MemorySample:
    pipe = client.pipeline(transaction=False)
    for run in runs:
        pipe.xlen(KEYS.log(run))
        pipe.memory_usage(KEYS.log(run), samples=0)
        pipe.memory_usage(KEYS.cursor(run), samples=0)
    replies = [v or 0 for v in pipe.execute()]
    entries, streams, checkpoints = sum(replies[0::3]), sum(replies[1::3]), sum(replies[2::3])
    rq_keys = list(client.scan_iter(match="rq:*", count=1000))
    pipe = client.pipeline(transaction=False)
    for key in rq_keys:
        pipe.memory_usage(key, samples=0)
    pipe.memory_usage(KEYS.feed(), samples=0)
    *rq_sizes, feed = pipe.execute()
    used = int(client.info("memory")["used_memory"])
    return MemorySample(used=used, entries=entries, rq=sum(v or 0 for v in rq_sizes), feed=feed or 0, streams=streams,
                        checkpoints=checkpoints)  # fmt: skip


def notify_stand_in(client: redis.Redis, stop: threading.Event) -> None:
    """Read and acknowledge the feed's `notify` group, as the bot's notifier does (without posting), so that the
    dispatcher's trim drops consumed entries as in a deployment."""
    reader = GroupReader(client, stream=KEYS.feed(), group=NOTIFY_GROUP, consumer="bench-notifier")
    reader.ensure_group()
    while not stop.is_set():
        entries = reader.read(count=1000, block_ms=200)
        reader.ack([fid for fid, _ in entries])


def record_stops(row: Row, store: EventStore, spec: SimSpec, since: float) -> None:
    """Into `row`, for the NaN runs whose NaN came after `since`: how many; NaN event ts -> STOP decision
    (stream id time); of that, the part until the NaN event was in Redis; decision -> its evidence pack's
    result (the time a worker spends on the pack, during which it takes no other job)."""
    row.stop_latency_s, row.stored_latency_s, row.evidence_s, row.stops_asked = [], [], [], 0
    for run in nan_onsets(spec):
        entries = list(store.iter_run(run))
        by_id = {e.id: e for _, e in entries if isinstance(e, Event)}
        sids = {e.id: sid for sid, e in entries if isinstance(e, Event)}
        first_nan = next((e for _, e in entries if isinstance(e, Event) and e.type == t.METRIC
                          and isinstance(e.data.get("loss"), float) and math.isnan(e.data["loss"])), None)  # fmt: skip
        if first_nan is None or first_nan.ts < since:
            continue
        row.stops_asked += 1
        stop = next(((sid, e) for sid, e in entries if isinstance(e, Event) and e.type == t.DECISION
                     and e.data.get("decision") == t.STOP), None)  # fmt: skip
        if stop is None:
            continue
        decided, trigger = stop[0], by_id.get(stop[1].data.get("trigger", ""))
        if trigger is not None:
            row.stop_latency_s.append(sid_seconds(decided) - trigger.ts)
            row.stored_latency_s.append(sid_seconds(sids[trigger.id]) - trigger.ts)
        built = next((sid for sid, e in entries if isinstance(e, Event)
                      and e.type in (t.EVIDENCE_BUILT, t.EVIDENCE_FAILED)), None)  # fmt: skip
        if built is not None:
            row.evidence_s.append(sid_seconds(built) - sid_seconds(decided))


def settle_window(row: Row, lags: list[tuple[float, float]], depths: list[int], procs: Procs, *, store: EventStore,
                  spec: SimSpec, since: float, drain_s: float) -> None:  # fmt: skip
    """Into `row`, once a window's publishing ended: the lag and queue figures, what simulate published, and the
    NaN -> STOP latencies, the STOPs still on their way waited for up to `drain_s` so that slow ones count too."""
    values = [lag for _, lag in lags]
    row.lag_mean_s, row.lag_max_s, row.lag_growth = statistics.fmean(values), max(values), slope(lags)
    row.queue_mean, row.queue_max = statistics.fmean(depths), max(depths)
    found = re.findall(r"= ([\d,]+) events/s", (procs.work / "simulate.log").read_text())
    row.published_eps = float(found[-1].replace(",", "")) if found else math.nan
    procs.started.pop("simulate", None)
    drain_until = time.monotonic() + drain_s
    while True:
        record_stops(row, store, spec, since=since)
        if len(row.stop_latency_s) >= row.stops_asked or time.monotonic() > drain_until:
            break
        time.sleep(0.5)


def await_workers(client: redis.Redis, count: int) -> None:
    """Until `count` workers of the queue have registered, at most 60 s."""
    queue = Queue(QUEUE, connection=client)
    deadline = time.monotonic() + 60
    while Worker.count(queue=queue) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {Worker.count(queue=queue)} of {count} workers registered within 60 s")
        time.sleep(0.2)


def print_doubling(drains: dict[int, Drain], baseline: float, *, target: str = "") -> None:
    """The drains' throughput per doubling of workers, and the best against the raw XADD baseline."""
    print(f"  throughput per doubling of workers, T(2k)/(2 T(k)) (1.0 = linear{target}):")
    for k, k2, speedup, eff in doubling_ratios({d.workers: d.eps for d in drains.values()}):
        print(f"    {k} -> {k2} workers: {speedup:.2f}x, ratio {eff:.2f}")
    best = max(drains.values(), key=lambda d: d.eps)
    print(f"  best: {best.eps:,.0f} events/s with {best.workers} workers = {best.eps / baseline:.3f} of raw XADD")


def await_dispatcher(client: redis.Redis) -> None:
    """Until a dispatcher's heartbeat is there: its first step writes it, just before reading the feed."""
    deadline = time.monotonic() + 30
    while not client.exists(KEYS.heartbeat("dispatcher")):
        if time.monotonic() > deadline:
            raise SystemExit("no dispatcher started within 30 s")
        time.sleep(0.01)


def await_drained(client: redis.Redis, runs: list[str], total: int, workers: int) -> None:
    """Until the runs' checkpoints have folded `total` metric events (a backlog drained), at most 300 s."""
    deadline = time.monotonic() + 300
    while processed(client, runs) < total:
        if time.monotonic() > deadline:
            raise SystemExit(f"{workers} workers did not drain {total:,} events within 300 s")
        time.sleep(0.05)


@dataclass(slots=True)
class Drain:
    workers: int
    events: int
    seconds: float
    cpu: dict[str, float]  # cores
    machine_busy: float

    @property
    def eps(self) -> float:
        return self.events / self.seconds


def publish_backlog(client: redis.Redis, runs: int, per_run: int) -> int:
    """Each run's events as the agent would send them one a flush (one feed entry each), all at once."""
    spec = SimSpec(runs=runs, rate_hz=1.0, duration_s=float(per_run), generation=int(time.time()))
    shard = Shard(spec, 0)
    publisher = Publisher(EventStore(client, keys=KEYS))
    for step in range(per_run):
        publisher.publish(shard.events(step * runs, (step + 1) * runs, time.time()))
        publisher.flush()
    return publisher.appended


def raw_baseline(client: redis.Redis, runs: int, events: int) -> float:
    """Pipelined XADD of the same JSON envelopes over the same streams: what Redis takes from one client."""
    names = [run_name(SimSpec(runs=runs, rate_hz=1), i) for i in range(runs)]
    payloads = [
        json.dumps({"id": f"sim/log/{names[i % runs]}/g1:{i // runs + 1}", "type": "metric", "v": 1,
                    "run": names[i % runs], "host": "sim", "ts": time.time(), "seq": i // runs + 1,
                    "data": metric_data(i // runs, nan=False)}, separators=(",", ":"))
        for i in range(events)
    ]  # fmt: skip
    keys = [f"bench:raw:{{{name}}}" for name in names]
    start = time.perf_counter()
    for lo in range(0, events, 1000):
        pipe = client.pipeline(transaction=False)
        for i in range(lo, min(events, lo + 1000)):
            pipe.xadd(keys[i % runs], {"e": payloads[i]})
        pipe.execute()
    rate = events / (time.perf_counter() - start)
    client.delete(*keys)
    return rate


def batches(items, size: int):  # type: ignore[no-untyped-def]
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch

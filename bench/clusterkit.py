"""Bench plumbing for a Redis Cluster (bench/cluster.py): the event log on a 3-master cluster, RQ on its own Redis.

bench/load.py measures one Redis, where the events and RQ's queue share a client; here they are two, and Redis's
CPU is the sum over the masters. The figures themselves (Row, Drain, the feed lag, processed events, STOP
latencies, the backlog) are load.py's, imported, so both benches measure the same things the same way.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis
from loadkit import (
    KEYS,
    QUEUE,
    Drain,
    Procs,
    Row,
    await_dispatcher,
    await_drained,
    await_workers,
    feed_lag,
    machine_cpu,
    processed,
    publish_backlog,
    settle_window,
)
from redis.cluster import RedisCluster
from rq import Queue
from rq.registry import StartedJobRegistry
from trainwarden.events.store import EventStore

from trainwarden.tools.simulate import SimSpec, run_name

# wall, processed, CPU per role, CPU per master, machine
Mark = tuple[float, int, dict[str, float], dict[str, float], tuple[float, float]]


@contextmanager
def as_host(host: str) -> Iterator[None]:
    """Processes started inside take `host` as their host name (TRAINWARDEN_HOST): load.Procs passes our environment."""
    before = os.environ.get("TRAINWARDEN_HOST")
    os.environ["TRAINWARDEN_HOST"] = host
    try:
        yield
    finally:
        if before is None:
            del os.environ["TRAINWARDEN_HOST"]
        else:
            os.environ["TRAINWARDEN_HOST"] = before


def masters_cpu(client: RedisCluster) -> dict[str, float]:
    """CPU seconds each master has used (user + sys), by its address: the feed's master may be busier."""
    out = {}
    for node in client.get_primaries():
        info = client.get_redis_connection(node).info("cpu")
        out[node.name] = float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    return out


def feed_master(client: RedisCluster) -> str:
    return client.get_node_from_key(KEYS.feed()).name


def keys_per_master(client: RedisCluster, runs: list[str]) -> dict[str, int]:
    """How many of `runs` each master holds (their logs' slots)."""
    counts: dict[str, int] = {}
    for run in runs:
        node = client.get_node_from_key(KEYS.log(run)).name
        counts[node] = counts.get(node, 0) + 1
    return counts


@dataclass(slots=True)
class ClusterBench:
    """Dispatchers, workers and `trainwarden simulate` as processes; events on `events`, jobs on `jobs`."""

    events: RedisCluster
    jobs: redis.Redis
    procs: Procs
    args: argparse.Namespace
    workers_up: int = 0

    def ensure_workers(self, count: int) -> None:
        if self.workers_up == count:
            return
        self.procs.stop("worker")
        for i in range(count):  # each as if on a host of its own (its heartbeat, its outputs' host)
            with as_host(f"central-{i + 1}"):
                self.procs.start("worker", "worker")
        await_workers(self.jobs, count)
        self.workers_up = count

    def reset(self) -> None:
        """Empty the queue, let running jobs finish, empty the masters (they hold nothing but the event log)."""
        queue = Queue(QUEUE, connection=self.jobs)
        queue.empty()
        started = StartedJobRegistry(queue=queue)
        deadline = time.monotonic() + 30
        while started.get_job_count(cleanup=True) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.events.flushall(target_nodes=RedisCluster.PRIMARIES)

    def start_dispatchers(self, count: int) -> None:
        for i in range(count):  # one consumer group: they share the feed's entries
            with as_host(f"central-{i + 1}"):
                self.procs.start("dispatcher", "dispatcher")

    def mark(self, runs: list[str]) -> Mark:
        return time.time(), processed(self.events, runs), self.procs.cpu(), masters_cpu(self.events), machine_cpu()

    def measure(self, rate: float, workers: int) -> Row:
        """Live load: `runs` x `rate` Hz from `sim_processes` producer hosts, measured over the window."""
        args = self.args
        self.ensure_workers(workers)
        self.reset()
        row = Row(runs=args.runs, rate=rate, workers=workers, offered_eps=args.runs * rate)
        spread = max(0.0, args.duration - args.warmup - 2 / rate)  # each NaN run sends its NaN inside the window
        spec = SimSpec(runs=args.runs, rate_hz=rate, duration_s=args.duration, nan_fraction=args.nan_fraction,
                       nan_after_s=args.warmup, nan_spread_s=spread)  # fmt: skip
        runs = [run_name(spec, i) for i in range(args.runs)]
        self.start_dispatchers(args.dispatchers)
        sim = self.procs.start(
            "simulate", "simulate", "--runs", str(args.runs), "--rate", str(rate), "--duration", str(args.duration),
            "--processes", str(args.sim_processes), "--nan-fraction", str(args.nan_fraction), "--nan-after",
            str(args.warmup), "--nan-spread", str(spec.nan_spread_s), "--report-every", "1000",
        )  # fmt: skip
        sim_start = time.time() + 1.0 + 0.2 * args.sim_processes  # simulate's own start delay
        window_start, window_end = sim_start + args.warmup, sim_start + args.duration
        lags: list[tuple[float, float]] = []
        depths: list[int] = []
        queue = Queue(QUEUE, connection=self.jobs)
        start: Mark | None = None
        while time.time() < window_end:
            now = time.time()
            if now >= window_start:
                start = start or self.mark(runs)
                lags.append((now, feed_lag(self.events, now)))
                depths.append(queue.count)
            time.sleep(0.5)
        assert start is not None
        end = self.mark(runs)
        row.lag_end_s = feed_lag(self.events, time.time())
        if sim.wait(timeout=120) != 0:
            raise SystemExit(f"simulate failed: {(self.procs.work / 'simulate.log').read_text()[-2000:]}")
        _fill(row, start, end)
        store = EventStore(self.events, keys=KEYS)
        settle_window(row, lags, depths, self.procs, store=store, spec=spec, since=window_start, drain_s=args.drain)
        self.procs.stop("dispatcher")
        return row

    def drain(self, workers: int) -> Drain:
        """Time `workers` workers (and the dispatchers) take to evaluate a fixed backlog."""
        args = self.args
        self.ensure_workers(workers)
        self.reset()
        runs = [run_name(SimSpec(runs=args.backlog_runs, rate_hz=1), i) for i in range(args.backlog_runs)]
        total = publish_backlog(self.events, args.backlog_runs, args.backlog)
        self.start_dispatchers(args.drain_dispatchers)
        await_dispatcher(self.events)
        start = self.mark(runs)
        await_drained(self.events, runs, total, workers)
        end = self.mark(runs)
        self.procs.stop("dispatcher")
        row = Row(runs=args.backlog_runs, rate=0.0, workers=workers)
        _fill(row, start, end)
        return Drain(workers=workers, events=total, seconds=end[0] - start[0], cpu=row.cpu,
                     machine_busy=row.machine_busy)  # fmt: skip


def _fill(row: Row, start: Mark, end: Mark) -> None:
    """Processed events/s, CPU in cores per role and Redis (all masters), the machine's busy share."""
    span = end[0] - start[0]
    row.processed_eps = (end[1] - start[1]) / span
    row.cpu = {role: (end[2].get(role, 0.0) - start[2].get(role, 0.0)) / span for role in end[2]}
    per_master = {node: (end[3][node] - start[3].get(node, 0.0)) / span for node in end[3]}
    row.cpu["redis"] = sum(per_master.values())
    row.cpu.update({f"master {node}": cores for node, cores in per_master.items()})
    row.machine_busy = (end[4][0] - start[4][0]) / max(1, end[4][1] - start[4][1])

"""Load: 1,000 synthetic runs through the real publisher, dispatcher and RQ workers, up to saturation.

A private redis-server (AOF on, as deployed); `trainwarden dispatcher` and W `trainwarden worker`
processes; `trainwarden simulate` publishing N runs x R Hz of agent-like metric events through the
agent's publisher, with a few runs turning NaN (spread over the measuring window) so the policy
decides STOP and builds evidence as it would for real. Per configuration, over the window after
the warm-up:

- processed events/s: metric events the workers evaluated (the `metric` count folded into every
  run's checkpoint), start to end of the window;
- dispatcher lag: age of the oldest feed entry not yet finished (pending in the `dispatch` group,
  or not yet read by it), sampled every 0.5 s;
- RQ queue depth (jobs; a job covers up to 32 runs), sampled;
- decision latency: NaN metric event's timestamp -> its STOP decision's stream id (Redis clock);
  `--nan-samples N` repeats the window until N are in (one window of 1,000 runs gives 20), and
  `--neighbour` keeps one core busy during each window, as other work on a shared machine does;
- Redis memory: used_memory growth / events stored, and the event store alone (MEMORY USAGE of
  every trainwarden key) per event; a run stream's MEMORY USAGE / XLEN; and the steady cost, over
  the window: used_memory growth / events stored in it, with the part of it in RQ's keys (jobs,
  results, registries) and in the feed. A stand-in for the bot's notifier reads and acknowledges
  the `notify` group (as a deployed bot does), so that the dispatcher's trim drops consumed entries;
- worker CPU per event: the workers' cores / processed events/s;
- CPU of Redis, the dispatcher, the workers (with their forked work horses) and the simulator, in
  cores, to name what saturated.

Parts: (1) 1,000 runs at 1 Hz with 1, 2, 4, 8 workers; (2) capacity: a backlog of 2,000 runs x 10
events (published while no dispatcher runs) drained by 1, 2, 4, 8 workers (best of 2), timed from the dispatcher's
first step to the last event evaluated, giving the throughput ratio per doubling of workers,
T(2k) / (2 T(k)) (1.0 = linear; target >= 0.7) -- under live load the workers cannot be made the
limit on a small machine, because a job reads all of a run's events since its last one, so a
slower worker just reads more per job; (3) a ramp of the rate with 2 workers until the system no
longer keeps up. Baseline, measured in the same run: redis-py pipelined XADD of the same JSON
envelopes into the same Redis, over the same 1,000 streams. This machine's core count is printed:
with 2 cores, workers past 2 share the same CPUs.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import redis
import yaml
from harness import percentile, private_redis
from loadkit import (
    KEYS,
    QUEUE,
    Drain,
    MemorySample,
    Neighbour,
    Procs,
    Row,
    await_dispatcher,
    await_drained,
    await_workers,
    batches,
    feed_lag,
    machine_cpu,
    memory_sample,
    notify_stand_in,
    print_doubling,
    processed,
    publish_backlog,
    raw_baseline,
    settle_window,
    trainwarden_memory,
)
from rq import Queue
from rq.registry import StartedJobRegistry
from trainwarden.events.store import EventStore

from trainwarden.tools.simulate import SimSpec, run_name

FAST_QUEUE = f"{QUEUE}-fast"  # the workers' fast lane (empty, and harmless to empty, where there is none)
MAX_WINDOWS = 60  # windows one figure may take to gather --nan-samples
SIM_EVENTS_PER_PROCESS = 6000  # events/s one simulate process is given (it manages ~15,000 alone)


@dataclass(slots=True)
class Bench:
    client: redis.Redis
    procs: Procs
    args: argparse.Namespace
    fork: bool
    neighbour: Neighbour
    workers_up: int = 0

    def ensure_workers(self, count: int) -> None:
        """Start (or stop and restart) the worker processes so exactly `count` run."""
        if self.workers_up == count:
            return
        self.procs.stop("worker")
        for _ in range(count):
            self.procs.start("worker", "worker", *(["--fork"] if self.fork else []))
        await_workers(self.client, count)
        self.workers_up = count

    def reset(self) -> None:
        """Empty the queues, let running jobs finish, drop every trainwarden key."""
        Queue(FAST_QUEUE, connection=self.client).empty()
        queue = Queue(QUEUE, connection=self.client)
        queue.empty()
        started = StartedJobRegistry(queue=queue)
        deadline = time.monotonic() + 30
        while started.get_job_count(cleanup=True) and time.monotonic() < deadline:
            time.sleep(0.1)
        for keys in batches(self.client.scan_iter(match=f"{KEYS.namespace}:*", count=1000), 1000):
            self.client.delete(*keys)

    def measure(self, rate: float, workers: int) -> Row:
        args = self.args
        self.ensure_workers(workers)
        self.reset()
        row = Row(runs=args.runs, rate=rate, workers=workers, offered_eps=args.runs * rate)
        spec = SimSpec(runs=args.runs, rate_hz=rate, duration_s=args.duration, nan_fraction=args.nan_fraction,
                       nan_after_s=args.warmup, nan_spread_s=max(0.0, args.duration - args.warmup - 3.0))  # fmt: skip
        processes = max(1, math.ceil(row.offered_eps / SIM_EVENTS_PER_PROCESS))
        runs = [run_name(spec, i) for i in range(args.runs)]
        self.procs.start("dispatcher", "dispatcher")
        memory_before = int(self.client.info("memory")["used_memory"])
        notifying = threading.Event()
        notifier = threading.Thread(target=notify_stand_in, args=(self.client, notifying), daemon=True)
        notifier.start()
        mem_start: MemorySample | None = None
        sim = self.procs.start(
            "simulate", "simulate", "--runs", str(args.runs), "--rate", str(rate), "--duration", str(args.duration),
            "--processes", str(processes), "--nan-fraction", str(args.nan_fraction), "--nan-after", str(args.warmup),
            "--nan-spread", str(spec.nan_spread_s), "--report-every", "1000",
        )  # fmt: skip
        sim_start = time.time() + 1.0 + 0.2 * processes  # simulate's own start delay
        window_start, window_end = sim_start + args.warmup, sim_start + args.duration
        lags: list[tuple[float, float]] = []
        depths: list[int] = []
        queues = [Queue(name, connection=self.client) for name in (FAST_QUEUE, QUEUE)]
        start: tuple[float, int, dict[str, float], float, tuple[float, float]] | None = None
        while time.time() < window_end:
            now = time.time()
            if now >= window_start:
                if args.neighbour:
                    self.neighbour.start()
                start = start or self._mark(runs)
                mem_start = mem_start or memory_sample(self.client, runs)
                lags.append((now, feed_lag(self.client, now)))
                depths.append(sum(q.count for q in queues))
            time.sleep(0.5)
        assert start is not None and mem_start is not None
        end = self._mark(runs)
        memory_sample(self.client, runs).per_event(mem_start, row)
        row.lag_end_s = feed_lag(self.client, time.time())
        if sim.wait(timeout=60) != 0:
            raise SystemExit(f"simulate failed: {(self.procs.work / 'simulate.log').read_text()[-2000:]}")
        span = end[0] - start[0]
        row.processed_eps = (end[1] - start[1]) / span
        row.cpu = {role: (end[2].get(role, 0.0) - start[2].get(role, 0.0)) / span for role in end[2]}
        row.cpu["redis"] = (end[3] - start[3]) / span
        row.machine_busy = (end[4][0] - start[4][0]) / max(1, end[4][1] - start[4][1])
        store = EventStore(self.client, keys=KEYS)
        settle_window(row, lags, depths, self.procs, store=store, spec=spec, since=window_start, drain_s=args.drain)
        self.neighbour.stop()
        self.procs.stop("dispatcher")
        notifying.set()
        notifier.join(timeout=5)
        total, streams, entries = trainwarden_memory(self.client)
        row.events_stored = entries
        row.used_memory_per_event = (int(self.client.info("memory")["used_memory"]) - memory_before) / max(1, entries)
        row.store_memory_per_event = total / max(1, entries)
        row.stream_bytes_per_entry = streams / max(1, entries)
        return row

    def sample(self, rate: float, workers: int) -> Row:
        """`measure`, repeated until `--nan-samples` NaN -> STOP latencies are in (each window gives
        runs x nan-fraction); the first window's throughput, lag and memory, every window's latencies."""
        row = self.measure(rate, workers)
        while len(row.stop_latency_s) < self.args.nan_samples and row.windows < MAX_WINDOWS:
            more = self.measure(rate, workers)
            row.stop_latency_s += more.stop_latency_s
            row.stored_latency_s += more.stored_latency_s
            row.evidence_s += more.evidence_s
            row.stops_asked += more.stops_asked
            row.windows += 1
            print(f"  window {row.windows}: {len(row.stop_latency_s)} NaN -> STOP samples", file=sys.stderr)
        return row

    def drain(self, workers: int) -> Drain:
        """Time W workers (and the dispatcher) take to evaluate a backlog of runs x per-run events."""
        args = self.args
        self.ensure_workers(workers)
        self.reset()
        runs = [run_name(SimSpec(runs=args.backlog_runs, rate_hz=1), i) for i in range(args.backlog_runs)]
        total = publish_backlog(self.client, args.backlog_runs, args.backlog)
        self.procs.start("dispatcher", "dispatcher")
        await_dispatcher(self.client)
        start = self._mark(runs)
        await_drained(self.client, runs, total, workers)
        end = self._mark(runs)
        self.procs.stop("dispatcher")
        span = end[0] - start[0]
        cpu = {role: (end[2].get(role, 0.0) - start[2].get(role, 0.0)) / span for role in end[2]}
        cpu["redis"] = (end[3] - start[3]) / span
        busy = (end[4][0] - start[4][0]) / max(1, end[4][1] - start[4][1])
        return Drain(workers=workers, events=total, seconds=span, cpu=cpu, machine_busy=busy)

    def _mark(self, runs: list[str]) -> tuple[float, int, dict[str, float], float, tuple[float, float]]:
        cpu = self.client.info("cpu")
        redis_cpu = float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])
        return time.time(), processed(self.client, runs), self.procs.cpu(), redis_cpu, machine_cpu()


# -- report -------------------------------------------------------------------------------------


def print_table(title: str, rows: list[Row]) -> None:
    print(f"\n{title}")
    print("  workers  runs x Hz  offered/s  processed/s  lag mean/max/end s  growth  queue mean/max  "
          "STOP p50/p99 ms (n)   CPU redis/disp/workers/sim  worker ms/event  keeps up")  # fmt: skip
    notes = []
    for r in rows:
        ms = [1000 * v for v in r.stop_latency_s]
        stored = [1000 * v for v in r.stored_latency_s]
        packs = [1000 * v for v in r.evidence_s]
        stops = f"{percentile(ms, 0.5):5.0f}/{percentile(ms, 0.99):5.0f} ({len(ms)}/{r.stops_asked})"
        cpu = "/".join(f"{r.cpu.get(k, 0.0):.2f}" for k in ("redis", "dispatcher", "worker", "simulate"))
        lag = f"{r.lag_mean_s:.1f}/{r.lag_max_s:.1f}/{r.lag_end_s:.1f}"
        print(f"  {r.workers:>7}  {r.runs:>5} x {r.rate:<3g}{r.offered_eps:>9,.0f}  {r.processed_eps:>11,.0f}  "
              f"{lag:>18}  {r.lag_growth:>6.2f}  {r.queue_mean:>7.0f}/{r.queue_max:<6d}  {stops:>19}  {cpu:>26}  "
              f"{r.worker_ms_per_event:>15.3f}  {'yes' if r.keeps_up else 'NO'}")  # fmt: skip
        if not r.keeps_up:
            notes.append(f"  {r.workers} worker(s) at {r.rate:g} Hz: {r.bottleneck}")
        if r.published_eps < 0.97 * r.offered_eps:
            notes.append(f"  {r.workers} worker(s) at {r.rate:g} Hz: simulate published only {r.published_eps:,.0f}/s")
        notes.append(
            f"  NaN -> STOP decision, {r.workers} worker(s) at {r.runs:,} x {r.rate:g} Hz: p50 "
            f"{percentile(ms, 0.5):.0f} / p90 {percentile(ms, 0.9):.0f} / p99 {percentile(ms, 0.99):.0f} / "
            f"max {max(ms, default=math.nan):.0f} ms over {len(ms)} samples in {r.windows} window(s); of which "
            f"until the NaN was in Redis p50 {percentile(stored, 0.5):.0f} / p99 {percentile(stored, 0.99):.0f} ms; "
            f"a worker on each evidence pack p50 {percentile(packs, 0.5):.0f} / p99 {percentile(packs, 0.99):.0f} ms"
        )
    print("\n".join(notes))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--workers", default="1,2,4,8", help="worker process counts (part 1 and 2)")
    p.add_argument("--backlog", type=int, default=10, help="events per run in the backlog of part 2")
    p.add_argument("--backlog-runs", type=int, default=2000, help="runs in the backlog of part 2")
    p.add_argument("--drain-repeats", type=int, default=2, help="drains per worker count in part 2 (best taken)")
    p.add_argument("--rates", default="1,2,5,10,20", help="Hz per run for the ramp (3), until it breaks")
    p.add_argument("--ramp-workers", type=int, default=2)
    p.add_argument("--duration", type=float, default=16.0, help="seconds each configuration publishes")
    p.add_argument("--warmup", type=float, default=6.0, help="seconds before the measuring window")
    p.add_argument("--nan-fraction", type=float, default=0.02, help="runs that turn NaN (STOP latency samples)")
    p.add_argument("--drain", type=float, default=10.0, help="seconds to wait after a window for STOPs on their way")
    p.add_argument("--fork", action="store_true", help="forking workers (trainwarden worker --fork)")
    p.add_argument("--parts", default="1,2,3", help="which parts to run")
    p.add_argument(
        "--nan-samples",
        type=int,
        default=0,
        help="repeat each window until this many NaN -> STOP "
        "latencies are in (at least 100 for a p99 that is not the maximum)",
    )
    p.add_argument(
        "--neighbour",
        action="store_true",
        help="a process keeps one core busy during each window (other work sharing the machine)",
    )
    args = p.parse_args()
    worker_counts = [int(w) for w in args.workers.split(",")]
    parts = {int(x) for x in args.parts.split(",")}
    started = time.monotonic()
    results: dict[tuple[float, int], Row] = {}
    with tempfile.TemporaryDirectory(prefix="tw-load-") as d, private_redis() as server:
        work = Path(d)
        config = work / "trainwarden.yaml"
        config.write_text(yaml.safe_dump({
            "redis_url": server.url, "host": "bench", "data_dir": str(work), "evidence_dir": str(work / "evidence"),
            "findings_file": str(work / "findings.md"),
        }))  # fmt: skip
        client = server.client()
        baseline = raw_baseline(client, args.runs, 100_000)
        procs = Procs(config, work)
        bench = Bench(client=client, procs=procs, args=args, fork=args.fork, neighbour=Neighbour())

        def measure(rate: float, workers: int) -> Row:
            if (rate, workers) not in results:
                results[rate, workers] = bench.sample(rate, workers)
                print(f"  measured {workers} worker(s) at {args.runs} x {rate:g} Hz "
                      f"({time.monotonic() - started:.0f}s so far)", file=sys.stderr)  # fmt: skip
            return results[rate, workers]

        drains: dict[int, Drain] = {}
        try:
            # Worker counts in order, so each set of workers is started once for parts 1 and 2.
            for w in worker_counts:
                if 1 in parts:
                    measure(1.0, w)
                if 2 in parts:  # the best of a few drains: each lasts seconds, and this machine is shared
                    drains[w] = max((bench.drain(w) for _ in range(args.drain_repeats)), key=lambda d: d.eps)
                    print(f"  drained with {w} worker(s) ({time.monotonic() - started:.0f}s so far)", file=sys.stderr)
            ramp: list[Row] = []
            if 3 in parts:
                for rate in [float(r) for r in args.rates.split(",")]:
                    ramp.append(measure(rate, args.ramp_workers))
                    if not ramp[-1].keeps_up:
                        break
        finally:
            bench.neighbour.stop()
            procs.stop_all()
    kind = "forking (--fork)" if args.fork else "non-forking (default)"
    window = args.duration - args.warmup
    print(f"load: {args.runs:,} synthetic runs, real publisher, dispatcher and {kind} RQ workers; "
          f"{os.cpu_count()} cores; window {window:g} s after {args.warmup:g} s warm-up")  # fmt: skip
    if args.neighbour:
        print("  --neighbour: a process kept one core busy during every window")
    print(f"  raw baseline: redis-py pipelined XADD of the same envelopes over {args.runs:,} streams: "
          f"{baseline:,.0f} events/s")  # fmt: skip
    if 1 in parts:
        print_table(f"1) {args.runs:,} runs at 1 Hz", [results[1.0, w] for w in worker_counts])
    if 2 in parts:
        print(f"\n2) capacity: a backlog of {args.backlog_runs:,} runs x {args.backlog} events drained "
              f"(dispatcher's first step -> last event evaluated; best of {args.drain_repeats})")  # fmt: skip
        print("  workers  events/s  seconds  CPU redis/disp/workers  machine busy")
        for d in drains.values():
            cpu = "/".join(f"{d.cpu.get(k, 0.0):.2f}" for k in ("redis", "dispatcher", "worker"))
            print(f"  {d.workers:>7}  {d.eps:>8,.0f}  {d.seconds:>7.1f}  {cpu:>21}  {d.machine_busy:>12.0%}")
        print_doubling(drains, baseline, target="; target >= 0.7")
    if 3 in parts:
        print_table(f"3) ramp with {args.ramp_workers} workers", ramp)
        broken = next((r for r in ramp if not r.keeps_up), None)
        kept = [r for r in ramp if r.keeps_up]
        if broken is None:
            print(f"  kept up at every rate tried (up to {ramp[-1].offered_eps:,.0f} events/s)")
        else:
            last = f"{kept[-1].offered_eps:,.0f} events/s ({kept[-1].rate:g} Hz)" if kept else "none"
            print(f"  saturates between {last} and {broken.offered_eps:,.0f} events/s ({broken.rate:g} Hz): "
                  f"{broken.bottleneck}")  # fmt: skip
    if results:
        r = max(results.values(), key=lambda row: row.events_stored)
        print(f"\nRedis memory, {r.runs:,} x {r.rate:g} Hz with {r.workers} workers: {r.events_stored:,} entries in "
              f"the run streams ({r.events_stored / r.runs:,.0f} a run), per entry:")  # fmt: skip
        for label, per in (
            ("used_memory growth (with RQ's jobs and results, and the feed)", r.used_memory_per_event),
            ("every trainwarden key (logs, checkpoints, marks, the untrimmed feed)", r.store_memory_per_event),
            ("the run streams alone (MEMORY USAGE / XLEN)", r.stream_bytes_per_entry),
        ):
            print(f"  {label:72} {per:6,.0f} B = {per * 1e6 / 2**20:5,.0f} MiB per 1M events")
        print("  steady cost over the window (used_memory growth / entries stored in it; per-run checkpoints, "
              "already there, not in it):")  # fmt: skip
        for label, per in (
            ("used_memory growth, all of it", r.window_bytes_per_event),
            ("of which RQ's keys (jobs, results, registries)", r.window_rq_bytes_per_event),
            ("of which the feed (trimmed by the dispatcher once consumed)", r.window_feed_bytes_per_event),
            ("of which the run streams", r.window_stream_bytes_per_event),
            ("of which the checkpoints (rule windows, recent metrics: full after ~20-50 events)",
             r.window_checkpoint_bytes_per_event),
        ):  # fmt: skip
            print(f"  {label:72} {per:6,.0f} B = {per * 1e6 / 2**20:5,.0f} MiB per 1M events")
    print(f"  total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()

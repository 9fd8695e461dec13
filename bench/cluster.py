"""Cluster: 10,000 synthetic runs at 0.2 Hz on a 3-master Redis Cluster, with several workers and dispatchers.

The topology of docs/operations.md ("Scaling out"), on one machine: the event log on a real Redis Cluster
(`redis-server --cluster-enabled yes` x 3 on loopback, no replicas), RQ's queue on its own redis-server,
`--dispatchers` dispatchers sharing the feed's consumer group, W workers each as if on a host of its own
(`TRAINWARDEN_HOST=central-N`), and `trainwarden simulate` publishing through the agent's publisher from
`--sim-processes` producer hosts. Parts:

1. live: N runs x R Hz (default 10,000 x 0.2 = 2,000 events/s) for each worker count in `--workers`: processed
   events/s, dispatcher lag (mean, max, end, and its slope: seconds gained per second; level = keeps up), queue
   depth, NaN metric event -> STOP decision p50/p99 (`--nan-fraction` of the runs turn NaN in the window), CPU;
2. capacity: a fixed backlog (`--backlog-runs` x `--backlog` events, published while no dispatcher runs) drained
   by k workers for each k in `--drain-workers`, best of `--drain-repeats`; the ratio per doubling
   T(2k) / (2 T(k)) (1.0 = linear); and the CPU each event cost per role (what docs/operations.md's estimate for
   bigger machines is computed from);
3. the same drains with the event log and RQ on one redis-server (load.py's own `Bench.drain`, unchanged), so
   the cluster's cost is a ratio measured in the same run, on the same machine.

Baseline, measured in the same run: redis-py pipelined XADD of the same JSON envelopes into the same cluster,
over the same streams. The figures are load.py's (imported), measured the same way.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml
from clusterkit import ClusterBench, feed_master, keys_per_master
from harness import private_redis
from load import Bench, print_table
from loadkit import Drain, Neighbour, Procs, Row, doubling_ratios, print_doubling, raw_baseline
from redis.cluster import RedisCluster

from trainwarden.tools.redis_server import RedisClusterServers
from trainwarden.tools.simulate import SimSpec, run_name


def per_event_costs(drain: Drain) -> dict[str, float]:
    """CPU microseconds each evaluated event cost, per role (cores / events per second)."""
    return {role: 1e6 * cores / drain.eps for role, cores in drain.cpu.items()}


def per_core(row: Row) -> dict[str, float]:
    """Events/s each core of a role evaluated (processed events/s / that role's cores), live."""
    return {
        role: row.processed_eps / cores
        for role, cores in row.cpu.items()
        if cores > 0 and role not in ("sim", "simulate")
    }


def cores_for(runs: int, rate_hz: float, eps_per_core: dict[str, float]) -> dict[str, float]:
    """Cores each role needs for `runs` at `rate_hz`, at the events/s per core measured (no headroom)."""
    return {role: runs * rate_hz / eps for role, eps in eps_per_core.items() if not role.startswith("master ")}


def drain_on_one_redis(args: argparse.Namespace, work: Path) -> dict[int, Drain]:
    """Part 3: load.py's drain, unchanged, on a private redis-server holding the events and RQ's queue."""
    out: dict[int, Drain] = {}
    with private_redis() as server:
        config = work / "one-redis.yaml"
        config.write_text(yaml.safe_dump({
            "redis_url": server.url, "host": "bench", "data_dir": str(work / "one"),
            "evidence_dir": str(work / "one" / "evidence"), "findings_file": str(work / "one" / "findings.md"),
        }))  # fmt: skip
        procs = Procs(config, work)
        bench = Bench(client=server.client(), procs=procs, args=args, fork=False, neighbour=Neighbour())
        try:
            for w in (int(x) for x in args.drain_workers.split(",")):
                out[w] = max((bench.drain(w) for _ in range(args.drain_repeats)), key=lambda x: x.eps)
        finally:
            procs.stop_all()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=10_000)
    p.add_argument("--rate", type=float, default=0.2, help="Hz per run (part 1)")
    p.add_argument("--workers", default="2,3", help="worker process counts for part 1")
    p.add_argument("--drain-workers", default="1,2", help="worker process counts for part 2")
    p.add_argument("--dispatchers", type=int, default=2, help="dispatchers in part 1")
    p.add_argument("--drain-dispatchers", type=int, default=1, help="dispatchers in part 2 (part 3, load.py's, has 1)")
    p.add_argument("--sim-processes", type=int, default=3, help="producer processes, each a host")
    p.add_argument("--masters", type=int, default=3)
    p.add_argument("--backlog", type=int, default=10, help="events per run in the backlog of part 2")
    p.add_argument("--backlog-runs", type=int, default=2000, help="runs in the backlog of part 2")
    p.add_argument("--drain-repeats", type=int, default=2)
    p.add_argument("--duration", type=float, default=30.0, help="seconds each live configuration publishes")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds before the measuring window")
    p.add_argument("--nan-fraction", type=float, default=0.002, help="runs that turn NaN (STOP latency samples)")
    p.add_argument("--drain", type=float, default=15.0, help="seconds to wait after a window for STOPs on their way")
    p.add_argument("--parts", default="1,2,3")
    args = p.parse_args()
    parts = {int(x) for x in args.parts.split(",")}
    started = time.monotonic()
    rows: list[Row] = []
    drains: dict[int, Drain] = {}
    single: dict[int, Drain] = {}
    hot = ""
    with (
        tempfile.TemporaryDirectory(prefix="tw-cluster-") as d,
        RedisClusterServers(Path(d) / "cluster", masters=args.masters) as cluster,
        private_redis() as rq_server,
    ):
        work = Path(d)
        config = work / "trainwarden.yaml"
        config.write_text(yaml.safe_dump({
            "redis_url": cluster.url, "rq_redis_url": rq_server.url, "host": "bench", "data_dir": str(work),
            "evidence_dir": str(work / "evidence"), "findings_file": str(work / "findings.md"),
        }))  # fmt: skip
        events = RedisCluster.from_url(cluster.url.replace("redis+cluster://", "redis://"), socket_timeout=30)
        baseline = raw_baseline(events, args.runs, 100_000)
        spread = keys_per_master(events, [run_name(SimSpec(runs=args.runs, rate_hz=1), i) for i in range(args.runs)])
        hot = feed_master(events)
        procs = Procs(config, work)
        bench = ClusterBench(events=events, jobs=rq_server.client(), procs=procs, args=args)
        try:
            if 1 in parts:
                for w in (int(x) for x in args.workers.split(",")):
                    rows.append(bench.measure(args.rate, w))
                    print(f"  measured {w} worker(s) ({time.monotonic() - started:.0f}s so far)", file=sys.stderr)
            if 2 in parts:
                for w in (int(x) for x in args.drain_workers.split(",")):
                    drains[w] = max((bench.drain(w) for _ in range(args.drain_repeats)), key=lambda x: x.eps)
                    print(f"  drained with {w} worker(s) ({time.monotonic() - started:.0f}s so far)", file=sys.stderr)
            if 3 in parts:
                single = drain_on_one_redis(args, work)
        finally:
            procs.stop_all()
    print(f"cluster: {args.masters}-master Redis Cluster (no replicas) + RQ on its own Redis; {args.dispatchers} "
          f"dispatcher(s) live, {args.drain_dispatchers} in drains, {args.sim_processes} producer host(s); "
          f"{os.cpu_count()} cores on this machine, load average {os.getloadavg()[0]:.1f} at the end")  # fmt: skip
    print(f"  runs per master: {', '.join(f'{n:,}' for _, n in sorted(spread.items()))}")
    print(f"  raw baseline: redis-py pipelined XADD of the same envelopes over {args.runs:,} streams on the cluster: "
          f"{baseline:,.0f} events/s")  # fmt: skip
    if rows:
        print_table(f"1) {args.runs:,} runs at {args.rate:g} Hz (window {args.duration - args.warmup:g} s after "
                    f"{args.warmup:g} s warm-up)", rows)  # fmt: skip
        for r in rows:
            masters = ", ".join(f"{k.removeprefix('master ')} {v:.2f}" for k, v in sorted(r.cpu.items())
                                if k.startswith("master "))  # fmt: skip
            print(f"  {r.workers} worker(s): CPU per master (the feed is on {hot}): {masters}")
        for r in rows:
            eps = per_core(r)
            need = "; ".join(
                f"{n:,} runs: " + ", ".join(f"{role} {c:.1f}" for role, c in cores_for(n, args.rate, eps).items())
                for n in (10_000, 100_000)
            )
            print(f"  {r.workers} worker(s): events/s per core: worker {eps.get('worker', 0):,.0f}, dispatcher "
                  f"{eps.get('dispatcher', 0):,.0f}, Redis (all masters) {eps.get('redis', 0):,.0f}; cores needed at "
                  f"{args.rate:g} Hz: {need}")  # fmt: skip
        for r in rows:
            print(
                f"  {r.workers} worker(s): {'keeps up' if r.keeps_up else 'does NOT keep up'} "
                f"(lag slope {r.lag_growth:+.3f} s/s, {r.processed_eps:,.0f} of {r.offered_eps:,.0f} events/s)"
            )
    if drains:
        print(f"\n2) capacity: a backlog of {args.backlog_runs:,} runs x {args.backlog} events drained "
              f"(dispatchers' first step -> last event evaluated; best of {args.drain_repeats})")  # fmt: skip
        print("  workers  events/s  seconds  CPU redis(all masters)/disp/workers  machine busy  CPU us/event "
              "redis/disp/workers")  # fmt: skip
        for dr in drains.values():
            cpu = "/".join(f"{dr.cpu.get(k, 0.0):.2f}" for k in ("redis", "dispatcher", "worker"))
            cost = per_event_costs(dr)
            us = "/".join(f"{cost.get(k, 0.0):.0f}" for k in ("redis", "dispatcher", "worker"))
            print(f"  {dr.workers:>7}  {dr.eps:>8,.0f}  {dr.seconds:>7.1f}  {cpu:>32}  {dr.machine_busy:>12.0%}  "
                  f"{us:>20}")  # fmt: skip
        print(f"  CPU per master (cores; the feed is on {hot}):")
        for dr in drains.values():
            masters = ", ".join(f"{k.removeprefix('master ')} {v:.2f}" for k, v in sorted(dr.cpu.items())
                                if k.startswith("master "))  # fmt: skip
            print(f"    {dr.workers} worker(s): {masters}")
        print_doubling(drains, baseline)
    if single:
        print("\n3) the same backlog on one redis-server (events and RQ; load.py's drain), same run:")
        print("  workers  events/s one Redis  events/s cluster  cluster / one Redis  CPU us/event redis/disp/workers")
        for w, one in single.items():
            on_cluster = drains.get(w)
            ratio = f"{on_cluster.eps / one.eps:.2f}" if on_cluster else "-"
            cost = per_event_costs(one)
            us = "/".join(f"{cost.get(k, 0.0):.0f}" for k in ("redis", "dispatcher", "worker"))
            print(f"  {w:>7}  {one.eps:>17,.0f}  {on_cluster.eps if on_cluster else 0:>16,.0f}  {ratio:>19}  {us:>20}")
        for k, k2, speedup, eff in doubling_ratios({w: one.eps for w, one in single.items()}):
            print(f"    one Redis, {k} -> {k2} workers: {speedup:.2f}x, ratio {eff:.2f}")
    print(f"  total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()

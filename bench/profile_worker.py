"""Where a worker's CPU goes per event at 1,000 runs x 1 Hz: cProfile of real RQ jobs, grouped.

A private redis-server; R runs each get one metric event per step through the agent's publisher,
the real dispatcher turns the feed into jobs (32 runs a job, as under load), and an in-process RQ
worker (`trainwarden worker`'s class) drains them in burst mode: each job sees about one event per
run, as at 1 Hz. First the steps are timed without the profiler (worker CPU ms per event, the
figure bench/load.py measures across processes), then profiled in CPU time (waiting on Redis is
not the worker's cost). Printed: the top functions by cumulative and by self time, and the worker's
time per event grouped: RQ's bookkeeping, Redis round trips (redis-py called by the jobs, and by
RQ), decode, fold + policy, checkpoint encode/decode. The groups are cumulative times of named
entry points, so they do not overlap; what is left is the job's own glue. A burst `work()` per step
registers a worker each time (about a millisecond a step, spread over all of its events). One worker
process holds every run's checkpoint after its first turn (workers/batch.py's cache); with W worker
processes about 1/W of the turns find theirs: `--no-cache` shows the other end.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness import private_redis
from rq import Queue
from trainwarden.agent.publisher import Publisher
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore
from trainwarden.remote.stop import LocalTmuxController
from trainwarden.workers import context
from trainwarden.workers.context import WorkerContext
from trainwarden.workers.dispatcher import Dispatcher
from trainwarden.workers.policy_source import PolicySource
from trainwarden.workers.rq_worker import InProcessWorker

from trainwarden.tools.simulate import Shard, SimSpec

QUEUE = "trainwarden"
Func = tuple[str, int, str]  # pstats' key: file, line, function name

# Groups: (label, predicate on a pstats key) of entry points whose cumulative time is counted once.
ENTRY_GROUPS: list[tuple[str, Callable[[Func], bool]]] = [
    ("decode (stored bytes -> events)", lambda f: f[2] == "decode_entries"),
    ("fold + policy (evaluate_entries)", lambda f: f[2] == "evaluate_entries"),
    ("checkpoint encode/decode", lambda f: f[2] in ("encode_checkpoint", "decode_checkpoint", "encode_changed")),
]


def _in(path: str, package: str) -> bool:
    return f"/site-packages/{package}/" in path


def _rq_side(path: str) -> bool:
    """RQ's code, and this project's RQ worker class around it (workers/rq_worker.py)."""
    return _in(path, "rq") or path.endswith("workers/rq_worker.py")


def _job_side(path: str) -> bool:
    return not _rq_side(path) and "/site-packages/" not in path


def _job_side(path: str) -> bool:
    return not _rq_side(path) and "/site-packages/" not in path


def redis_time(stats: dict[Func, tuple], *, caller_is: Callable[[str], bool]) -> float:
    """Cumulative time of redis-py entered from callers whose file matches `caller_is`."""
    total = 0.0
    for func, (_cc, _nc, _tt, _ct, callers) in stats.items():
        if not _in(func[0], "redis"):
            continue
        for caller, (_c1, _c2, _t, ct) in callers.items():
            if not _in(caller[0], "redis") and caller_is(caller[0]):
                total += ct
    return total


def cumulative(stats: dict[Func, tuple], match: Callable[[Func], bool]) -> float:
    return sum(ct for func, (_cc, _nc, _tt, ct, _callers) in stats.items() if match(func))


def publish_step(publisher: Publisher, shard: Shard, step: int, runs: int, *, t0: float) -> None:
    """One event per run, stamped a second after the last (as at 1 Hz: time-based rules see real spacing)."""
    publisher.publish(shard.events(step * runs, (step + 1) * runs, t0 + step))
    publisher.flush()


def dispatch_all(dispatcher: Dispatcher) -> None:
    """Read the whole feed into jobs (the queue is empty: they go out at once)."""
    while dispatcher.step(block_ms=None):
        pass
    dispatcher._release_gathered(spread=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=3, help="steps (events per run) before measuring")
    p.add_argument("--steps", type=int, default=10, help="steps timed, then as many profiled")
    p.add_argument("--top", type=int, default=20, help="functions listed by cumulative and by self time")
    p.add_argument("--no-cache", action="store_true", help="hold no checkpoint (every turn decodes the stored one)")
    args = p.parse_args()
    if args.no_cache:
        from trainwarden.workers import batch

        batch.CACHE.max_runs = 0
    with private_redis() as server, tempfile.TemporaryDirectory() as tmp:
        client = server.client()
        store = EventStore(client, keys=Keys())
        context.install(WorkerContext(store=store, host="bench", policies=PolicySource(host="bench"),
                                      controller=LocalTmuxController(), evidence_dir=Path(tmp)))  # fmt: skip
        queue = Queue(QUEUE, connection=client)
        dispatcher = Dispatcher(store=store, queue=queue, consumer="profile")
        dispatcher.setup()
        spec = SimSpec(runs=args.runs, rate_hz=1.0, generation=int(time.time()))
        shard = Shard(spec, 0)
        publisher = Publisher(store)
        step = 0
        t0 = time.time() - 3600  # event time: an hour ago, a second a step

        def work_steps(n: int, profiler: cProfile.Profile | None) -> tuple[float, int]:
            nonlocal step
            cpu = 0.0
            for _ in range(n):
                publish_step(publisher, shard, step, args.runs, t0=t0)
                step += 1
                dispatch_all(dispatcher)
                worker = InProcessWorker([queue], connection=client)
                began = time.process_time()
                if profiler is not None:
                    profiler.enable()
                worker.work(burst=True, logging_level="WARNING")
                if profiler is not None:
                    profiler.disable()
                cpu += time.process_time() - began
            return cpu, n * args.runs

        work_steps(args.warmup, None)
        plain_cpu, events = work_steps(args.steps, None)
        profiler = cProfile.Profile(time.process_time)  # CPU, not wall: waiting on Redis is not the worker's cost
        profiled_cpu, _ = work_steps(args.steps, profiler)
    per_event = 1000 * plain_cpu / events
    print(f"profile_worker: {args.runs:,} runs, one event per run per job turn (as at 1 Hz), 32 runs a job, "
          f"in-process RQ worker, {'no' if args.no_cache else 'with the'} checkpoint cache; {args.steps} steps timed, "
          f"{args.steps} profiled")  # fmt: skip
    print(f"  worker CPU per event, no profiler: {per_event:.3f} ms ({events:,} events, {plain_cpu:.2f} s)")
    print(f"  with cProfile: {1000 * profiled_cpu / events:.3f} ms (profiler overhead included below)")
    stats = pstats.Stats(profiler)
    raw: dict[Func, tuple] = stats.stats  # type: ignore[attr-defined]
    total = cumulative(raw, lambda f: f[2] == "work" and _in(f[0], "rq"))
    job = cumulative(raw, lambda f: f[2] == "process_runs")
    groups = [
        ("RQ bookkeeping (work loop, job records, registries) without its Redis", 0.0),
        ("Redis round trips made by RQ (redis-py, from rq/)", redis_time(raw, caller_is=_rq_side)),
        ("Redis round trips made by the job (redis-py, from trainwarden)", redis_time(raw, caller_is=_job_side)),
        *[(label, cumulative(raw, match)) for label, match in ENTRY_GROUPS],
    ]
    groups[0] = (groups[0][0], total - job - groups[1][1])
    glue = job - sum(v for _, v in groups[2:])
    groups.append(("the job's own glue (locks, loops, logging context, ...)", glue))
    print(f"\n  grouped, ms per event (profiled; all of work(): {1000 * total / events:.3f} ms, "
          f"of which the job function {1000 * job / events:.3f} ms)")  # fmt: skip
    for label, seconds in groups:
        print(f"    {label:72} {1000 * seconds / events:7.3f}  {seconds / total:5.0%}")
    for key, title in (("cumulative", "cumulative"), ("tottime", "self")):
        print(f"\n  top {args.top} by {title} time:")
        stats.sort_stats(key).print_stats(args.top)


if __name__ == "__main__":
    main()

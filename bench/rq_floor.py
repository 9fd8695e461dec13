"""What RQ itself costs a worker per job, against a bare consumer-group reader, on the same machine and Redis.

Both hand a worker `--jobs` jobs whose work does nothing, each carrying what a trainwarden job carries (`--runs`
runs with one feed id each); the figure is the consumer's CPU (`time.process_time`) per job, best of `--repeats`:

- RQ: `Queue.enqueue_many` as the dispatcher enqueues (result_ttl 0), drained by `trainwarden worker`'s
  in-process class (`InProcessWorker`, burst): RQ's dequeue, job hash, registries, heartbeats, status writes;
- bare: the same payloads XADDed to a stream, read by XREADGROUP (one entry a read: a job at a time) and
  acknowledged by XACK, two round trips a job.

The difference is RQ's own cost a job; divided by the runs a job holds at 1,000 runs x 1 Hz (`--runs`, ~25 with
two workers) it is what RQ adds to each metric event, the floor under the worker's CPU per event while jobs go
through RQ.

    .venv/bin/python bench/rq_floor.py [--jobs 2000] [--runs 25] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import time

import redis
from harness import private_redis
from rq import Queue
from trainwarden.workers.dispatcher import FAILURE_TTL_S, RESULT_TTL_S
from trainwarden.workers.rq_worker import InProcessWorker


def noop(work: list[list[object]]) -> int:
    return len(work)


def payload(runs: int, job: int) -> list[list[object]]:
    return [[f"run{job % 1000:04d}-{i}", [f"{1_800_000_000_000 + job}-{i}"]] for i in range(runs)]


def rq_per_job(client: redis.Redis, jobs: int, runs: int) -> tuple[float, float]:
    """(enqueue, worker) CPU seconds per job."""
    queue = Queue("floor", connection=client)
    t0 = time.process_time()
    for start in range(0, jobs, 32):
        datas = [Queue.prepare_data(noop, args=(payload(runs, j),), result_ttl=RESULT_TTL_S,
                                    failure_ttl=FAILURE_TTL_S, description="process runs")
                 for j in range(start, min(jobs, start + 32))]  # fmt: skip
        queue.enqueue_many(datas)
    enqueue = time.process_time() - t0
    worker = InProcessWorker([queue], connection=client)
    t0 = time.process_time()
    worker.work(burst=True, logging_level="WARNING")
    work = time.process_time() - t0
    assert queue.count == 0 and queue.failed_job_registry.count == 0, "not every job ran"
    return enqueue / jobs, work / jobs


def bare_per_job(client: redis.Redis, jobs: int, runs: int) -> tuple[float, float]:
    """(XADD, XREADGROUP + XACK) CPU seconds per job."""
    stream, group = "floor-stream", "workers"
    client.xgroup_create(stream, group, id="0", mkstream=True)
    t0 = time.process_time()
    for start in range(0, jobs, 32):
        pipe = client.pipeline(transaction=False)
        for j in range(start, min(jobs, start + 32)):
            pipe.xadd(stream, {"work": json.dumps(payload(runs, j))})
        pipe.execute()
    enqueue = time.process_time() - t0
    done = 0
    t0 = time.process_time()
    while True:
        got = client.xreadgroup(group, "w1", {stream: ">"}, count=1)
        if not got:
            break
        for sid, fields in got[0][1]:
            noop(json.loads(fields[b"work"]))
            client.xack(stream, group, sid)
            done += 1
    work = time.process_time() - t0
    assert done == jobs, "not every entry was read"
    client.delete(stream)
    return enqueue / jobs, work / jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=25, help="runs a job holds (one metric event each)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with private_redis() as server:
        client = redis.Redis(port=server.port)
        rq_runs = [rq_per_job(client, args.jobs, args.runs) for _ in range(args.repeats)]
        bare_runs = [bare_per_job(client, args.jobs, args.runs) for _ in range(args.repeats)]
    rq_enq, rq_work = min(e for e, _ in rq_runs), [w for _, w in rq_runs]
    bare_enq, bare_work = min(e for e, _ in bare_runs), [w for _, w in bare_runs]
    best_rq, best_bare = min(rq_work), min(bare_work)
    spread = lambda xs: f"{1e6 * min(xs):.0f}-{1e6 * max(xs):.0f}"  # noqa: E731
    print(f"{args.jobs} jobs of {args.runs} runs, best of {args.repeats} (µs of CPU a job; all runs: spread)")
    print(f"  RQ worker (InProcessWorker, burst)    {1e6 * best_rq:8.0f}  ({spread(rq_work)})   "
          f"enqueue {1e6 * rq_enq:.0f}")  # fmt: skip
    print(f"  bare XREADGROUP + XACK reader         {1e6 * best_bare:8.0f}  ({spread(bare_work)})   "
          f"XADD {1e6 * bare_enq:.0f}")  # fmt: skip
    extra = best_rq - best_bare
    print(f"  RQ / bare: {best_rq / best_bare:.1f}x; RQ's own cost {1e6 * extra:.0f} µs a job = "
          f"{1e3 * extra / args.runs:.3f} ms a metric event at {args.runs} runs a job "
          f"(the worker's floor while jobs go through RQ: {1e3 * best_rq / args.runs:.3f} ms an event)")  # fmt: skip


if __name__ == "__main__":
    main()

"""Jobs covering several runs: how the dispatcher fills them, and what a job owes each of its runs."""

import dataclasses
import time

import pytest
from redis.lock import Lock
from rq import SimpleWorker
from trainwarden.events import types as t
from trainwarden.events.feed import DISPATCH_GROUP, GroupReader
from trainwarden.workers import context
from trainwarden.workers.errors import RunsFailed
from trainwarden.workers.lanes import lanes
from trainwarden.workers.process import process_runs, record_policy_events

from tests.helpers import dispatcher_for, evaluated_to_end, events_of, metric

pytestmark = pytest.mark.redis


def work(queue):
    SimpleWorker(lanes(queue), connection=queue.connection).work(burst=True, logging_level="WARNING")


def runs_per_job(queue):
    return [[run for run, _ in job.args[0]] for job in queue.get_jobs()]


def pending(store):
    return store.redis.xpending(store.keys.feed(), DISPATCH_GROUP)["pending"]


def occupy(queue):
    """A job waiting in the queue: the workers are busy, so the dispatcher gathers runs into fuller jobs."""
    queue.enqueue(process_runs, [])


def test_a_burst_on_an_idle_queue_goes_out_at_once_in_full_jobs_and_every_run_is_evaluated(store, queue, worker_ctx):
    store.append([metric(f"run{i:03d}", 1, loss=2.0) for i in range(100)])
    dispatcher_for(store, queue, idle_linger_s=3600).step()  # more than a job's worth: no waiting
    jobs = runs_per_job(queue)
    assert [len(job) for job in jobs] == [32, 32, 32, 4]
    assert sorted(run for job in jobs for run in job) == [f"run{i:03d}" for i in range(100)]
    work(queue)
    assert pending(store) == 0
    for i in range(100):
        assert [d.data["decision"] for d in events_of(store, f"run{i:03d}", t.DECISION)] == [t.CONTINUE]


def test_on_an_idle_queue_a_few_runs_wait_briefly_for_more_then_go_out_over_two_jobs(store, queue):
    dispatcher = dispatcher_for(store, queue, idle_linger_s=0.2)
    store.append([metric(f"run{i}", 1, loss=2.0) for i in range(3)])
    dispatcher.step()
    assert len(queue) == 0  # entries keep coming (1,000 runs at 1 Hz): one job of 1-3 runs a read costs too much
    store.append([metric(f"run{i}", 1, loss=2.0) for i in range(3, 6)])
    dispatcher.step()
    assert len(queue) == 0
    time.sleep(0.25)
    store.append([metric("run6", 1, loss=2.0)])
    dispatcher.step()  # the oldest waited idle_linger_s
    assert runs_per_job(queue) == [["run0", "run1", "run2"], ["run3", "run4", "run5"], ["run6"]]


def test_on_an_idle_queue_a_quiet_feed_sends_the_gathered_runs_at_once(store, queue):
    dispatcher = dispatcher_for(store, queue, idle_linger_s=3600)
    store.append([metric(f"run{i}", 1, loss=2.0) for i in range(4)])
    dispatcher.step()
    assert len(queue) == 0
    dispatcher.step()  # nothing new: waiting longer gains nothing
    assert runs_per_job(queue) == [["run0", "run1"], ["run2", "run3"]]  # two jobs: idle workers share them


def test_while_jobs_wait_runs_are_gathered_into_full_jobs(store, queue):
    dispatcher = dispatcher_for(store, queue, runs_per_job=10, linger_s=3600)
    occupy(queue)
    store.append([metric(f"run{i:02d}", 1, loss=2.0) for i in range(25)])
    dispatcher.step()
    assert [len(job) for job in runs_per_job(queue)] == [0, 10, 10, 5]
    store.append([metric(f"late{i}", 1, loss=2.0) for i in range(3)])
    dispatcher.step()
    assert len(queue) == 4  # three runs are not a job's worth: gathered while entries keep coming
    assert pending(store) == 28  # their entries stay pending until a job covers them
    dispatcher.step()  # nothing new: the feed went quiet, so waiting longer gains nothing
    assert runs_per_job(queue)[-1] == ["late0", "late1", "late2"]


def test_events_arriving_for_a_gathered_run_are_covered_by_its_job(store, queue, worker_ctx):
    dispatcher = dispatcher_for(store, queue, linger_s=3600)
    occupy(queue)
    store.append([metric("x", 1, step=1, loss=2.0), metric("y", 1, step=1, loss=2.0)])
    dispatcher.step()
    dispatcher.step()  # quiet: one job for x and y
    assert runs_per_job(queue)[-1] == ["x", "y"]
    store.append([metric("x", 2, step=2, loss=2.2), metric("y", 2, step=2, loss=2.1)])  # (a NaN: the fast lane)
    dispatcher.step()
    assert len(queue) == 2  # no new job: the waiting one will read these events
    assert pending(store) == 2  # and the new entries were acknowledged as covered by it
    work(queue)
    assert [d.data["decision"] for d in events_of(store, "x", t.DECISION)] == [t.CONTINUE]
    assert [e.data["step"] for e in events_of(store, "x", t.METRIC)] == [1, 2]
    assert evaluated_to_end(store, "x")
    assert [e.data["step"] for e in events_of(store, "y", t.METRIC)] == [1, 2]
    assert pending(store) == 0


def test_a_run_that_fails_does_not_hold_up_the_others_in_its_job(store, r, worker_ctx):
    context.install(dataclasses.replace(worker_ctx, lock_timeout_s=0.2))
    store.append([metric(run, 1, loss=2.0) for run in ("a", "busy", "b")])
    reader = GroupReader(r, stream=store.keys.feed(), group=DISPATCH_GROUP, consumer="d1")
    reader.ensure_group()
    fids = {fields[b"r"].decode(): [fid] for fid, fields in reader.read()}
    held = Lock(r, store.keys.lock("busy"), timeout=30)
    assert held.acquire(blocking=False)
    with pytest.raises(RunsFailed, match="busy: RunBusy"):
        process_runs([[run, fids[run]] for run in ("a", "busy", "b")])
    assert events_of(store, "a", t.DECISION) and events_of(store, "b", t.DECISION)
    assert events_of(store, "busy", t.DECISION) == []
    assert [e["message_id"].decode() for e in r.xpending_range(store.keys.feed(), DISPATCH_GROUP, "-", "+", 10)] == (
        fids["busy"]
    )  # only the failed run's entry is left for the retry
    held.release()
    process_runs([["busy", fids["busy"]]])
    assert [d.data["decision"] for d in events_of(store, "busy", t.DECISION)] == [t.CONTINUE]
    assert pending(store) == 0


def test_a_stall_over_the_lock_timeout_mid_turn_ends_the_turn_and_the_next_job_finishes(store, r, worker_ctx):
    stalls = [0.6]  # the first evaluation stalls (a paused process, a swapped-out page) past the 0.2 s lock

    def stalling_clock() -> float:
        if stalls:
            time.sleep(stalls.pop())
        return time.time()

    record_policy_events(worker_ctx)  # the policy's first load (and the breaker's note of its rules) done before
    context.install(dataclasses.replace(worker_ctx, lock_timeout_s=0.2, clock=stalling_clock))
    store.append([metric("x", 1, loss=2.0)])
    reader = GroupReader(r, stream=store.keys.feed(), group=DISPATCH_GROUP, consumer="d1")
    reader.ensure_group()
    read = reader.read()
    reader.ack([fid for fid, fields in read if fields[b"r"] != b"x"])  # the policy's first load, recorded above
    fids = [fid for fid, fields in read if fields[b"r"] == b"x"]
    with pytest.raises(RunsFailed, match="x: RunBusy: the run lock expired mid-turn"):
        process_runs([["x", fids]])
    assert pending(store) == 1  # left for the next job
    assert [d.data["decision"] for d in events_of(store, "x", t.DECISION)] == [t.CONTINUE]  # committed, stands
    store.append([metric("x", 2, loss=1.5)])
    context.install(worker_ctx)
    process_runs([["x", fids]])
    assert evaluated_to_end(store, "x")
    assert [d.data["decision"] for d in events_of(store, "x", t.DECISION)] == [t.CONTINUE]  # nothing twice
    assert pending(store) == 0

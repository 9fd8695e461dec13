"""The fast lane: a run with an event that can only mean trouble skips the backlog, and is evaluated once."""

import math

import pytest
from rq.registry import FinishedJobRegistry
from trainwarden.events import types as t
from trainwarden.events.feed import DISPATCH_GROUP
from trainwarden.workers import dispatcher as dispatcher_module
from trainwarden.workers import lanes as lanes_module
from trainwarden.workers import process as process_module
from trainwarden.workers.lanes import fast_lane, lanes
from trainwarden.workers.process import process_runs
from trainwarden.workers.rq_worker import InProcessWorker

from tests.helpers import dispatcher_for, evaluated_to_end, events_of, metric, nan_metric

pytestmark = pytest.mark.redis


def work(queue):
    """`trainwarden worker --burst`'s worker on both lanes (RQ's plain one may take 60 s to stop listening)."""
    InProcessWorker(lanes(queue), connection=queue.connection).work(burst=True, logging_level="WARNING")


def jobs_of(queue):
    return [[(run, len(fids)) for run, fids in job.args[0]] for job in queue.get_jobs()]


def pending(store):
    return store.redis.xpending(store.keys.feed(), DISPATCH_GROUP)["pending"]


def decisions(store, run):
    return [d.data["decision"] for d in events_of(store, run, t.DECISION)]


def test_the_feed_entry_of_a_batch_with_an_urgent_event_is_marked_and_others_are_not(store, r):
    store.append([metric("calm", 1, step=1, loss=2.0)])
    store.append([metric("hot", 1, step=1, loss=2.0), nan_metric("hot", 2)])
    store.append([nan_metric("hot", 2)])  # already stored: no entry at all
    entries = {fields[b"r"]: fields for _, fields in r.xrange(store.keys.feed())}
    assert len(r.xrange(store.keys.feed())) == 2
    assert b"u" not in entries[b"calm"]
    assert entries[b"hot"][b"u"] == b"1"


def test_an_urgent_run_goes_to_the_fast_lane_at_once_while_the_others_are_gathered(store, queue):
    dispatcher = dispatcher_for(store, queue, linger_s=3600)
    queue.enqueue(process_runs, [])  # the workers are busy: normal runs are gathered into fuller jobs
    store.append([metric("a", 1, step=1, loss=2.0), nan_metric("hot", 1), metric("b", 1, step=1, loss=2.0)])
    dispatcher.step()
    assert jobs_of(fast_lane(queue)) == [[("hot", 1)]]  # no lingering, no gathering with normal runs
    assert jobs_of(queue) == [[]]  # a and b wait for a job's worth or the feed to go quiet
    assert sorted(dispatcher.gathering.work) == ["a", "b"]


def test_a_gathered_run_that_turns_urgent_takes_its_gathered_entries_to_the_fast_lane(store, queue, worker_ctx):
    dispatcher = dispatcher_for(store, queue, linger_s=3600)
    queue.enqueue(process_runs, [])
    store.append([metric("x", 1, step=1, loss=2.0)])
    dispatcher.step()
    assert "x" in dispatcher.gathering.work
    store.append([nan_metric("x", 2)])
    dispatcher.step()
    assert jobs_of(fast_lane(queue)) == [[("x", 2)]]  # both entries: acknowledged by the fast job
    assert dispatcher.gathering.work == {}
    work(queue)
    assert decisions(store, "x") == [t.CONTINUE, t.STOP]
    assert pending(store) == 0


def test_a_run_waiting_in_the_normal_lane_is_evaluated_by_its_fast_job_once_and_the_normal_job_finds_it_done(
    store, queue, worker_ctx, monkeypatch
):
    monkeypatch.setattr(dispatcher_module, "RESULT_TTL_S", 60)  # keep the jobs' results to look at (deployed: none)
    dispatcher = dispatcher_for(store, queue, idle_linger_s=0)
    store.append([metric("x", 1, step=1, loss=2.0)])
    dispatcher.step()  # the queue was empty (and no waiting for more): x's normal job goes out at once
    assert jobs_of(queue) == [[("x", 1)]] and store.redis.exists(store.keys.queued("x"))
    store.append([nan_metric("x", 2)])
    dispatcher.step()
    assert jobs_of(fast_lane(queue)) == [[("x", 1)]]  # not held back by the normal job waiting for x
    store.append([nan_metric("x", 3)])
    dispatcher.step()
    assert len(fast_lane(queue)) == 1  # a fast job waits for x: it will read this one too
    (fast,), (normal,) = fast_lane(queue).get_jobs(), queue.get_jobs()
    work(queue)
    fast.refresh()
    normal.refresh()
    assert (fast.get_status(), normal.get_status()) == ("finished", "finished"), normal.exc_info
    assert fast.ended_at <= normal.started_at  # the fast lane went first, though its job came later
    assert fast.return_value()["outputs"] > 0
    done = normal.return_value()
    assert (done["outputs"], done["actions"]) == (0, 0)  # found it done (it read only the stop's own results)
    types = [e.type for e in events_of(store, "x")]
    assert decisions(store, "x") == [t.CONTINUE, t.STOP]  # exactly once
    assert types.count(t.STOP_REQUESTED) == 1 and types.count(t.EVIDENCE_BUILT) == 1
    assert evaluated_to_end(store, "x")
    assert pending(store) == 0


def test_critical_log_lines_and_failed_runs_take_the_fast_lane_and_routine_ones_do_not(store, queue):
    from trainwarden.events.envelope import make_event

    def event(run, kind, **data):
        return make_event(kind, run=run, host="gpu1", producer=f"gpu1/x/{run}/g0", seq=1, data=data, ts=1000.0)

    dispatcher = dispatcher_for(store, queue, linger_s=3600)
    queue.enqueue(process_runs, [])
    store.append([
        event("oom", t.LOG_LINE, tag="oom", line="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"),
        event("crashed", t.RUN_FAILED, exit_code=1),
        event("noisy", t.LOG_LINE, tag="traceback", line="Traceback (most recent call last):"),
        metric("inf", 1, step=1, loss=2.0, grad_norm=math.inf),
    ])  # fmt: skip
    dispatcher.step()
    assert sorted(run for job in jobs_of(fast_lane(queue)) for run, _ in job) == ["crashed", "inf", "oom"]
    assert list(dispatcher.gathering.work) == ["noisy"]


def test_a_normal_job_hands_its_remaining_runs_to_a_new_job_while_a_fast_job_waits(
    store, queue, worker_ctx, monkeypatch
):
    monkeypatch.setattr(lanes_module, "YIELD_AFTER_S", 0.0)  # yield after every run (a job yields after 50 ms)
    monkeypatch.setattr(dispatcher_module, "RESULT_TTL_S", 60)  # keep the finished jobs to count (deployed: none)
    # per-run turns, as on a Redis Cluster or for the runs a batched turn hands on (a STOP): those are what
    # yield; a batched turn of a few ms for all of a job's runs does not
    monkeypatch.setattr(process_module, "batched", lambda ctx: False)
    dispatcher = dispatcher_for(store, queue, linger_s=3600)
    queue.enqueue(process_runs, [])
    store.append([metric(run, 1, step=1, loss=2.0) for run in ("a", "b", "c")])
    dispatcher.step()
    dispatcher.step()  # quiet: one job for a, b and c
    assert jobs_of(queue)[-1] == [("a", 1), ("b", 1), ("c", 1)]
    fast_lane(queue).enqueue(process_runs, [])  # waits all along: this worker serves only the normal queue
    store.append([metric("b", 2, step=2, loss=2.1)])
    dispatcher.step()  # b's job has not begun: the new entry is covered by it
    assert pending(store) == 3
    InProcessWorker([queue], connection=queue.connection).work(burst=True, logging_level="WARNING")
    assert FinishedJobRegistry(queue=queue).count == 1 + 3  # a, then b, then c: each yielded what was left
    for run in ("a", "b", "c"):
        assert decisions(store, run) == [t.CONTINUE] and evaluated_to_end(store, run)
        assert not store.redis.exists(store.keys.queued(run))
    assert [e.data["step"] for e in events_of(store, "b", t.METRIC)] == [1, 2]
    assert pending(store) == 0
    assert len(fast_lane(queue)) == 1

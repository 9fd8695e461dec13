"""Dispatcher + process_run on a real Redis, in-process (SimpleWorker in burst mode)."""

import pytest
from rq import SimpleWorker
from trainwarden.events import types as t
from trainwarden.events.feed import DISPATCH_GROUP
from trainwarden.workers.lanes import lanes
from trainwarden.workers.process import process_run

from tests.helpers import dispatcher_for, evaluated_to_end, events_of, metric, nan_metric, wait_for

pytestmark = pytest.mark.redis


@pytest.fixture
def dispatcher(store, queue):
    # no wait on an idle queue: each step's runs go out at once (the wait: tests/integration/test_dispatch_jobs.py)
    return dispatcher_for(store, queue, idle_linger_s=0)


def work(queue):
    SimpleWorker(lanes(queue), connection=queue.connection).work(burst=True, logging_level="WARNING")


def pending(r, store):
    return r.xpending(store.keys.feed(), DISPATCH_GROUP)["pending"]


def test_many_batches_of_one_run_make_one_job(store, queue, dispatcher, worker_ctx):
    for i in range(1, 51):
        store.append([metric("exp01", i, step=i, loss=1.0)])
    dispatcher.step()
    assert queue.count == 1
    work(queue)
    assert pending(store.redis, store) == 0
    decisions = events_of(store, "exp01", t.DECISION)
    assert [d.data["decision"] for d in decisions] == [t.CONTINUE]


def test_an_idle_queue_gets_a_few_runs_over_two_jobs_for_two_workers(store, queue, dispatcher, worker_ctx):
    store.append([metric(f"run{i}", 1, loss=1.0) for i in range(5)])
    dispatcher.step()
    assert [len(job.args[0]) for job in queue.get_jobs()] == [2, 2, 1]


def test_nan_gives_one_stop_with_evidence_and_a_stop_attempt(store, queue, dispatcher, worker_ctx):
    store.append([metric("exp01", 1, step=1, loss=2.0), nan_metric("exp01", 2), nan_metric("exp01", 3)])
    for _ in range(3):
        dispatcher.step()
        work(queue)
    log = [e.type for e in events_of(store, "exp01")]
    assert log.count(t.ANOMALY_OPENED) == 1
    assert [e.data["decision"] for e in events_of(store, "exp01", t.DECISION)] == [t.CONTINUE, t.STOP]
    assert log.count(t.STOP_REQUESTED) == 1
    assert log.count(t.EVIDENCE_BUILT) == 1
    # No run.launched: there is nothing to stop, and the failure says so instead of pretending.
    failed = events_of(store, "exp01", t.STOP_FAILED)
    assert len(failed) == 1
    assert "no tmux session" in failed[0].data["error"]
    assert log.index(t.EVIDENCE_BUILT) < log.index(t.STOP_FAILED)


def test_running_a_job_again_changes_nothing(store, queue, dispatcher, worker_ctx):
    store.append([metric("exp01", 1, loss=2.0), nan_metric("exp01", 2)])
    process_run("exp01", [])
    before = [e.id for e in events_of(store, "exp01")]
    process_run("exp01", [])
    process_run("exp01", [])
    assert [e.id for e in events_of(store, "exp01")] == before


def test_garbage_in_a_run_stream_is_dead_lettered_and_processing_continues(store, r, worker_ctx):
    log_key = store.keys.log("exp01")
    store.append([metric("exp01", 1, loss=2.0)])
    r.xadd(log_key, {"e": b"{not json"})
    r.xadd(log_key, {"unexpected": b"field"})
    r.xadd(log_key, {"e": b'{"id": "x:1", "type": "metric"}'})
    store.append([nan_metric("exp01", 2)])
    summary = process_run("exp01", [])
    assert summary["dead_letters"] == 3
    letters = store.dead_letters()
    assert {d.source for d in letters} == {log_key}
    reasons = " | ".join(d.reason for d in letters)
    assert "not valid JSON" in reasons and "no 'e' field" in reasons and "missing envelope field" in reasons
    assert [e.data["decision"] for e in events_of(store, "exp01", t.DECISION)] == [t.CONTINUE, t.STOP]
    process_run("exp01", [])
    assert len(store.dead_letters()) == 3  # not dead-lettered twice


def test_garbage_in_the_feed_is_dead_lettered_and_dispatch_continues(store, r, queue, dispatcher):
    r.xadd(store.keys.feed(), {"r": b"exp01"})  # lacks f, l, t
    store.append([metric("exp01", 1, loss=1.0)])
    assert dispatcher.step() == 2
    assert queue.count == 1
    letters = store.dead_letters()
    assert len(letters) == 1
    assert letters[0].source == store.keys.feed()
    assert pending(r, store) == 1  # only the good entry, held until its job acknowledges it


def test_entries_with_only_worker_outputs_need_no_job(store, queue, dispatcher):
    from trainwarden.events.envelope import make_event

    store.append(
        [make_event(t.ANOMALY_OPENED, run="exp01", host="w", producer="eval/exp01", seq=1, data={"rule": "x"})]
    )
    dispatcher.step()
    assert queue.count == 0
    assert pending(store.redis, store) == 0


def test_entries_left_by_a_dead_job_are_dispatched_again(store, r, queue, dispatcher, worker_ctx):
    store.append([metric("exp01", 1, loss=2.0), nan_metric("exp01", 2)])
    dispatcher.step()
    for lane in lanes(queue):  # the job is lost (its worker died before running it); a NaN's is in the fast lane
        lane.empty()
    r.delete(store.keys.queued("exp01"), store.keys.fast("exp01"))
    assert pending(r, store) == 1

    def redispatched():
        dispatcher._next_reclaim = 0  # claim on every step, not every reclaim_idle_ms / 2
        dispatcher.step()
        return [lane.count for lane in lanes(queue)] == [1, 0]  # still urgent: the fast lane

    wait_for(redispatched, what="the stale entry (idle > 100 ms) to be dispatched again")
    work(queue)
    assert pending(r, store) == 0
    assert len(events_of(store, "exp01", t.STOP_REQUESTED)) == 1


def test_events_while_a_job_waits_are_covered_by_it(store, r, queue, dispatcher, worker_ctx):
    store.append([metric("exp01", 1, loss=2.0)])
    dispatcher.step()
    store.append(
        [metric("exp01", 2, loss=2.1)]
    )  # (a NaN would take the fast lane: tests/integration/test_fast_lane.py)
    dispatcher.step()
    assert queue.count == 1  # coalesced: the waiting job has not started reading
    assert pending(r, store) == 1  # and the new entry was acknowledged as covered by it
    work(queue)
    assert [e.data["loss"] for e in events_of(store, "exp01", t.METRIC)] == [2.0, 2.1]
    assert evaluated_to_end(store, "exp01")
    assert pending(r, store) == 0

"""The batched turn (workers/batch.py) on a real Redis: races, a WatchError, a STOP, kill -9 mid-commit."""

import dataclasses

import pytest
from rq import Queue, SimpleWorker
from trainwarden.events import types as t
from trainwarden.events.redis_types import hash_fields
from trainwarden.workers import batch
from trainwarden.workers.checkpoint import decode_checkpoint
from trainwarden.workers.dispatcher import Dispatcher
from trainwarden.workers.process import process_run, process_runs
from trainwarden.workers.verify import verify_run

from tests.conftest import kill_at_failpoint, spawn
from tests.helpers import evaluated_to_end, events_of, metric, nan_metric, wait_for

pytestmark = pytest.mark.redis

RUNS = ["exp01", "exp02", "exp03"]


def folded_metrics(store, run):
    """Metric events the run's checkpoint has folded (each exactly once, or this count is off)."""
    return decode_checkpoint(hash_fields(store.redis.hgetall(store.keys.cursor(run)))).run.type_counts["metric"]


def healthy(store, runs, steps, *, start=1):
    for seq in range(start, start + steps):
        store.append([metric(run, seq, step=seq, loss=2.0 - seq / 1000) for run in runs])


def assert_verified(store, worker_ctx, run):
    policy = worker_ctx.policies.policy
    assert verify_run(run, list(store.iter_run(run)), {policy.hash: policy}.__getitem__).ok


def test_a_job_of_several_runs_commits_them_in_one_batch(store, worker_ctx):
    healthy(store, RUNS, 3)
    result = batch.process_batch(worker_ctx, RUNS)
    # the first turn's outputs (policy.applied, the first decision) are read back by each run's own turn
    assert sorted(result.rest) == RUNS and result.done == []
    process_runs([[run, []] for run in RUNS])
    healthy(store, RUNS, 2, start=4)
    result = batch.process_batch(worker_ctx, RUNS)
    assert result.done == RUNS and result.rest == []  # quiet metrics: evaluated and committed here
    assert result.summary["events"] == 2 * len(RUNS)
    for run in RUNS:
        assert folded_metrics(store, run) == 5
        assert evaluated_to_end(store, run)
        assert not store.redis.exists(store.keys.lock(run))  # released
        assert_verified(store, worker_ctx, run)


def test_a_batched_turn_clears_both_lanes_flags_before_it_reads(store, worker_ctx):
    """A fast job of several runs (a burst of urgent runs) takes the batched turn: it must clear the `fast` flags as
    the per-run turn does, or the dispatcher acknowledges a later urgent entry as covered by a job that has read."""
    healthy(store, RUNS, 2)
    for run in RUNS:
        store.redis.set(store.keys.queued(run), "1")
        store.redis.set(store.keys.fast(run), "1")
    batch.process_batch(worker_ctx, RUNS)
    for run in RUNS:
        assert not store.redis.exists(store.keys.queued(run)) and not store.redis.exists(store.keys.fast(run))


def test_a_stop_in_a_batch_is_carried_out_once(store, worker_ctx):
    healthy(store, RUNS, 3)
    process_runs([[run, []] for run in RUNS])
    store.append([nan_metric("exp02", 4)])
    healthy(store, ["exp01", "exp03"], 1, start=4)
    result = process_runs([[run, []] for run in RUNS])
    assert result["actions"] >= 2  # the evidence and the stop attempt, in exp02's own turn after the batch
    process_runs([[run, []] for run in RUNS])  # again: nothing more
    types = [e.type for e in events_of(store, "exp02")]
    assert [e.data["decision"] for e in events_of(store, "exp02", t.DECISION)] == [t.CONTINUE, t.STOP]
    assert types.count(t.STOP_REQUESTED) == 1
    assert types.count(t.EVIDENCE_BUILT) == 1
    assert types.count(t.STOP_FAILED) == 1  # no tmux session: attempted once, and says so
    for run in ("exp01", "exp03"):
        assert [e.data["decision"] for e in events_of(store, run, t.DECISION)] == [t.CONTINUE]
    for run in RUNS:
        assert folded_metrics(store, run) == 4
        assert_verified(store, worker_ctx, run)


def test_a_watch_error_leaves_every_run_to_its_own_turn(store, r, worker_ctx):
    healthy(store, RUNS, 2)
    process_runs([[run, []] for run in RUNS])
    healthy(store, RUNS, 1, start=3)
    before = {run: r.hgetall(store.keys.cursor(run)) for run in RUNS}

    def clock_that_writes():  # called after the WATCH, as each run is evaluated: another writer moves exp02
        r.hset(store.keys.cursor("exp02"), "touched", "1")
        return worker_ctx.clock()

    touching = dataclasses.replace(worker_ctx, clock=clock_that_writes)
    result = batch.process_batch(touching, RUNS)
    assert sorted(result.rest) == RUNS and result.done == [] and not result.summary
    for run in RUNS:  # nothing of the batch was written
        after = r.hgetall(store.keys.cursor(run))
        after.pop(b"touched", None)
        assert after == before[run]
    process_runs([[run, []] for run in RUNS])  # each run in its own turn now
    for run in RUNS:
        assert folded_metrics(store, run) == 3
        assert evaluated_to_end(store, run)
        assert_verified(store, worker_ctx, run)


def test_a_checkpoint_written_by_a_per_run_turn_is_not_taken_from_the_cache(store, worker_ctx):
    healthy(store, ["exp01"], 2)
    process_runs([["exp01", []]])
    healthy(store, ["exp01"], 1, start=3)
    assert batch.process_batch(worker_ctx, ["exp01"]).done == ["exp01"]
    assert batch.CACHE.version("exp01")  # held: the next batched turn would not read it again
    healthy(store, ["exp01"], 1, start=4)
    process_run("exp01", [])  # the per-run turn writes a new version
    healthy(store, ["exp01"], 1, start=5)
    assert batch.process_batch(worker_ctx, ["exp01"]).done == ["exp01"]
    assert folded_metrics(store, "exp01") == 5  # a stale cached checkpoint would have lost seq 4 (and said 4)
    assert_verified(store, worker_ctx, "exp01")


def test_a_run_locked_by_another_turn_is_left_to_its_own_turn(store, r, worker_ctx):
    healthy(store, RUNS, 2)
    process_runs([[run, []] for run in RUNS])
    healthy(store, RUNS, 1, start=3)
    r.set(store.keys.lock("exp01"), "someone-else", px=60_000)
    result = batch.process_batch(worker_ctx, RUNS)
    assert result.rest == ["exp01"] and result.done == ["exp02", "exp03"]
    assert r.get(store.keys.lock("exp01")) == b"someone-else"  # not released by the batch
    assert folded_metrics(store, "exp01") == 2


@pytest.mark.slow
def test_two_workers_racing_on_the_same_runs(store, r, tmp_path, settings_file, worker_ctx):
    """Jobs of two worker processes cover the same runs at once: every event is folded once, one STOP."""
    runs = [f"race{i:02d}" for i in range(8)]
    queue = Queue("trainwarden", connection=r)
    for seq in range(1, 31):
        store.append([metric(run, seq, step=seq, loss=2.0 - seq / 1000) for run in runs])
        if seq == 20:
            store.append([nan_metric("race03", 20, producer="gpu1/nan")])
        queue.enqueue(process_runs, [[run, []] for run in runs])  # every job covers every run
    workers = [spawn(settings_file, tmp_path / f"w{i}.log", "worker", "--burst") for i in range(2)]
    for i, worker in enumerate(workers):
        assert worker.wait(timeout=120) == 0, (tmp_path / f"w{i}.log").read_text()
    SimpleWorker([queue], connection=r).work(burst=True, logging_level="WARNING")  # a job that met a busy lock
    process_runs([[run, []] for run in runs])
    for run in runs:
        assert folded_metrics(store, run) == (31 if run == "race03" else 30)
        assert_verified(store, worker_ctx, run)
    types = [e.type for e in events_of(store, "race03")]
    assert types.count(t.STOP_REQUESTED) == 1
    assert types.count(t.EVIDENCE_BUILT) == 1
    assert types.count(t.STOP_FAILED) == 1


@pytest.mark.slow
@pytest.mark.parametrize("failpoint", ["before-batch-commit", "after-batch-commit"])
def test_worker_killed_in_a_batched_commit(failpoint, store, r, tmp_path, settings_file, worker_ctx):
    """kill -9 with a batch's MULTI queued (nothing sent) or just after its EXEC (locks held, nothing acked)."""
    queue = Queue("trainwarden", connection=r)
    dispatcher = Dispatcher(store=store, queue=queue, consumer="d1", reclaim_idle_ms=300, linger_s=3600)
    dispatcher.setup()

    def one_job_of_all_runs(start: int, steps: int) -> None:
        queue.enqueue(process_runs, [])  # a waiting job: the dispatcher gathers the runs into one
        healthy(store, RUNS, steps, start=start)
        dispatcher.step()
        dispatcher.step()
        assert [[run for run, _ in job.args[0]] for job in queue.get_jobs()][-1] == RUNS

    one_job_of_all_runs(1, 2)
    SimpleWorker([queue], connection=r).work(burst=True, logging_level="WARNING")  # past the first outputs
    one_job_of_all_runs(3, 1)  # quiet metrics: the next turn is all batched

    kill_at_failpoint(settings_file, tmp_path / "doomed.log", r, failpoint, "worker")
    if failpoint == "before-batch-commit":
        assert all(folded_metrics(store, run) == 2 for run in RUNS)  # nothing half-written

    def recovered() -> bool:
        dispatcher._next_reclaim = 0  # claim on every step
        dispatcher.step()
        SimpleWorker([queue], connection=r).work(burst=True, logging_level="WARNING")
        return r.xpending(store.keys.feed(), "dispatch")["pending"] == 0

    # the dead worker's locks expire after the tests' lock_timeout_s (2 s); its entries are claimed again
    wait_for(recovered, timeout=90, what="the dead job's runs to be redone and acknowledged")
    for run in RUNS:
        assert folded_metrics(store, run) == 3
        assert [e.data["decision"] for e in events_of(store, run, t.DECISION)] == [t.CONTINUE]
        assert_verified(store, worker_ctx, run)

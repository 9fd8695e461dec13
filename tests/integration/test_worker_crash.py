"""kill -9 of an RQ worker in the middle of a job: every decision and side effect still happens once."""

import sys

import pytest
from rq import Queue, SimpleWorker
from trainwarden.events import types as t
from trainwarden.remote.local_launch import LaunchSpec, launch_local
from trainwarden.remote.stop import LocalTmuxController, StopTarget
from trainwarden.workers.dispatcher import Dispatcher
from trainwarden.workers.lanes import lanes
from trainwarden.workers.process import process_runs

from tests.conftest import REPO, kill_at_failpoint, spawn
from tests.helpers import events_of, metric, nan_metric, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.slow]


@pytest.mark.parametrize("failpoint", ["before-commit", "after-commit", "after-action"])
def test_worker_killed_mid_job(failpoint, store, r, tmp_path, tmux_socket, settings_file):
    spec = LaunchSpec(run="exp01", command=(sys.executable, "-c", "import time; time.sleep(120)"), workdir=REPO,
                      log_path=tmp_path / "exp01.log", tmux_socket=tmux_socket)  # fmt: skip
    launched = launch_local(spec, store=store, host="testhost")
    target = StopTarget.from_launch("exp01", launched.data, default_host="testhost")
    store.append([metric("exp01", 1, step=1, loss=2.0), nan_metric("exp01", 2)])

    queue = Queue("trainwarden", connection=r)
    dispatcher = Dispatcher(store=store, queue=queue, consumer="d1", reclaim_idle_ms=300)
    dispatcher.setup()
    dispatcher.step()
    assert [lane.count for lane in lanes(queue)] == [1, 0]  # the NaN's job is in the fast lane

    kill_at_failpoint(settings_file, tmp_path / "doomed.log", r, failpoint, "worker")

    if failpoint == "before-commit":
        assert events_of(store, "exp01", t.DECISION) == []  # nothing half-written
    assert LocalTmuxController().is_running(target)  # the stop comes after every failpoint

    def recovered() -> bool:
        dispatcher._next_reclaim = 0  # claim on every step
        dispatcher.step()
        return sum(lane.count for lane in lanes(queue)) >= 1

    wait_for(recovered, timeout=20, what="the dead job's feed entries to be dispatched again")
    survivor = spawn(settings_file, tmp_path / "survivor.log", "worker", "--burst")
    assert survivor.wait(timeout=60) == 0, (tmp_path / "survivor.log").read_text()

    types = [e.type for e in events_of(store, "exp01")]
    decisions = [e.data["decision"] for e in events_of(store, "exp01", t.DECISION)]
    assert decisions == [t.CONTINUE, t.STOP]
    assert types.count(t.ANOMALY_OPENED) == 1
    assert types.count(t.STOP_REQUESTED) == 1
    assert types.count(t.EVIDENCE_BUILT) == 1
    assert types.count(t.STOP_DONE) == 1
    assert not LocalTmuxController().is_running(target)
    (built,) = events_of(store, "exp01", t.EVIDENCE_BUILT)
    assert (tmp_path / "evidence" / "exp01").is_dir()
    assert len(list((tmp_path / "evidence" / "exp01").iterdir())) == 1, built.data


@pytest.mark.parametrize("failpoint", ["before-commit", "after-commit"])
def test_worker_killed_in_a_job_of_several_runs(failpoint, store, r, tmp_path, settings_file, worker_ctx):
    """Killed at the first run of a two-run job: both runs are redone, each decision once, nothing left pending.
    exp01's STOP is a finite runaway loss (a NaN would take the fast lane, in a job of its own)."""
    queue = Queue("trainwarden", connection=r)
    dispatcher = Dispatcher(store=store, queue=queue, consumer="d1", reclaim_idle_ms=300, linger_s=3600)
    dispatcher.setup()
    runaway = [1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0]  # loss-runaway: over 2x its best, 3 samples in a row
    store.append([*(metric("exp01", i, step=i, loss=v) for i, v in enumerate(runaway, 1)),
                  metric("exp02", 1, step=1, loss=2.0)])  # fmt: skip
    store.append([metric("exp02", 2, step=2, loss=2.1)])
    queue.enqueue(process_runs, [])  # a waiting job: the dispatcher gathers both runs into one
    dispatcher.step()
    dispatcher.step()
    assert [[run for run, _ in job.args[0]] for job in queue.get_jobs()][-1] == ["exp01", "exp02"]

    kill_at_failpoint(settings_file, tmp_path / "doomed.log", r, failpoint, "worker")

    def recovered() -> bool:
        # exp01's entries are claimed again at once; exp02's once the flag of the dead job's turn expires
        dispatcher._next_reclaim = 0
        dispatcher.step()
        SimpleWorker(lanes(queue), connection=r).work(burst=True, logging_level="WARNING")
        return r.xpending(store.keys.feed(), "dispatch")["pending"] == 0

    # each turn holds the run's lock 2s (the tests' lock_timeout_s): on a loaded host a STOP's evidence pack outlasts
    # it and the turn is redone; it converges, since each action commits once (30 s was too short in a loaded CI run)
    wait_for(recovered, timeout=90, what="every feed entry of the dead job to be redone and acknowledged")

    assert [e.data["decision"] for e in events_of(store, "exp01", t.DECISION)] == [t.CONTINUE, t.STOP]
    assert [e.data["decision"] for e in events_of(store, "exp02", t.DECISION)] == [t.CONTINUE]
    types = [e.type for e in events_of(store, "exp01")]
    assert types.count(t.STOP_REQUESTED) == 1
    assert types.count(t.EVIDENCE_BUILT) == 1
    assert types.count(t.STOP_FAILED) == 1  # no tmux session: the stop is attempted once and says so
    assert len(events_of(store, "exp02", t.METRIC)) == 2

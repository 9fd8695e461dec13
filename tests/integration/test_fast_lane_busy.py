"""The fast lane under load, with real processes: a NaN among 1,000 busy runs is decided before their backlog
drains, and once (`trainwarden dispatcher` and two `trainwarden worker` processes on a real redis-server)."""

import pytest
from rq import Queue, Worker
from trainwarden.events import types as t
from trainwarden.events.feed import DISPATCH_GROUP
from trainwarden.events.sids import sid_key
from trainwarden.workers.config import QUEUE_NAME
from trainwarden.workers.lanes import fast_lane

from tests.conftest import spawn, stop_process
from tests.helpers import evaluated_to_end, events_of, metric, nan_metric, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

RUNS = 1000
EVENTS = 20  # per run, in one batch: the backlog is ~32 jobs of 32 runs x 20 events
BEHIND = 100  # runs of the backlog still to evaluate when the STOP is decided: ~3 jobs' worth (on main: ~0-32)


def test_a_nan_among_1000_busy_runs_is_stopped_before_the_backlog_drains_and_once(store, r, tmp_path, settings_file):
    queue = Queue(QUEUE_NAME, connection=r)
    workers = [spawn(settings_file, tmp_path / f"worker{i}.log", "worker") for i in range(2)]
    procs = list(workers)
    try:
        wait_for(lambda: Worker.count(queue=queue) == 2, timeout=60, what="two workers")
        runs = [f"busy{i:04d}" for i in range(RUNS)]
        steps = range(1, EVENTS + 1)
        sids = store.append([metric(run, seq, step=seq, loss=3.0 - 0.01 * seq) for run in runs for seq in steps])
        assert sids is not None
        last = {run: sids[(i + 1) * EVENTS - 1] for i, run in enumerate(runs)}  # each run's last backlog entry
        procs.append(spawn(settings_file, tmp_path / "dispatcher.log", "dispatcher"))
        wait_for(lambda: queue.count >= 10, timeout=30, what="a backlog of jobs in the normal queue")
        hot = runs[-1]  # its entry came last: its normal job is the last of the backlog
        store.append([nan_metric(hot, EVENTS + 1)])

        def behind_at_stop() -> list[int] | None:
            if not any(b'"STOP"' in fields[b"e"] for _, fields in r.xrange(store.keys.log(hot), count=200)):
                return None
            with r.pipeline(transaction=False) as pipe:
                for run in runs[:-1]:
                    pipe.hget(store.keys.cursor(run), "after")
                afters = pipe.execute()
            return [
                sum(
                    not after or sid_key(after.decode()) < sid_key(last[run])
                    for run, after in zip(runs, afters, strict=False)
                )
            ]

        (behind,) = wait_for(behind_at_stop, timeout=60, interval=0.005, what="the NaN run's STOP")
        print(f"{behind} runs of the backlog left to evaluate when the NaN run's STOP was decided")
        assert behind >= BEHIND, f"only {behind} runs of the backlog were left when the NaN run's STOP was decided"

        wait_for(lambda: r.xpending(store.keys.feed(), DISPATCH_GROUP)["pending"] == 0 and queue.count == 0
                 and fast_lane(queue).count == 0, timeout=180, what="the backlog to drain")  # fmt: skip
    finally:
        for proc in procs:
            stop_process(proc)
        for name in ("dispatcher", "worker0", "worker1"):
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-2000:])
    types = [e.type for e in events_of(store, hot)]
    assert [d.data["decision"] for d in events_of(store, hot, t.DECISION)].count(t.STOP) == 1
    assert types.count(t.STOP_REQUESTED) == 1 and types.count(t.EVIDENCE_BUILT) == 1
    for run in (runs[0], runs[RUNS // 2], hot):
        assert evaluated_to_end(store, run)
        assert len(events_of(store, run, t.METRIC)) == EVENTS + (run == hot)

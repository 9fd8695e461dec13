"""The RQ worker beats at most once a second on its own: RQ beat before and after every job (three round
trips each), 40% of its round trips a job at the rates a busy installation has (bench/rq_floor.py)."""

from __future__ import annotations

import pytest
import redis
from rq import Queue
from trainwarden.workers import rq_worker
from trainwarden.workers.rq_worker import InProcessWorker


def _count(work: list[int]) -> int:
    return len(work)


def _hsets(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_hset", {}).get("calls", 0))


def _burst(r: redis.Redis, jobs: int) -> int:
    """HSETs a burst worker sends for `jobs` jobs that do nothing."""
    queue = Queue("beats", connection=r)
    for i in range(jobs):
        queue.enqueue(_count, [i], result_ttl=0)
    r.config_resetstat()
    InProcessWorker([queue], connection=r).work(burst=True, logging_level="WARNING")
    assert queue.count == 0 and queue.failed_job_registry.count == 0, "every job ran"
    return _hsets(r)


def test_a_burst_of_jobs_beats_about_once_a_second(r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    throttled = _burst(r, 200)
    monkeypatch.setattr(rq_worker, "HEARTBEAT_EVERY_S", 0.0)
    every_time = _burst(r, 200)
    # RQ's loop beats before and after each job: 400 HSETs more (a job's own hashes are written either way)
    assert every_time - throttled >= 350, (throttled, every_time)


def test_a_beat_with_its_own_timeout_is_always_sent(r: redis.Redis) -> None:
    worker = InProcessWorker([Queue("beats", connection=r)], connection=r)
    worker.register_birth()
    worker.heartbeat()
    r.config_resetstat()
    worker.heartbeat()  # within the second: skipped
    assert _hsets(r) == 0
    worker.heartbeat(60)  # RQ's own explicit beats (a horse that overran) always go out
    assert _hsets(r) == 1
    assert 0 < r.ttl(worker.key) <= 60

"""The workers' two queues: the fast lane, for runs with an event that can only mean trouble
(events/urgency.py), and the normal one. A worker listens to both, the fast lane first (RQ takes its
queues in order), so a NaN run's job never waits behind the backlog of routine metrics."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rq import Queue, get_current_job
from trainwarden.workers.config import FAST_QUEUE_SUFFIX

YIELD_AFTER_S = 0.05  # a normal job runs at least this long before it hands its remaining runs on to a new job


def fast_queue_name(queue: str) -> str:
    """`<queue>-fast`: the fast lane of the queue named `queue`."""
    return f"{queue}{FAST_QUEUE_SUFFIX}"


def fast_lane(queue: Queue) -> Queue:
    return Queue(fast_queue_name(queue.name), connection=queue.connection)


def lanes(queue: Queue) -> list[Queue]:
    """The queues a worker of `queue` serves, in the order it takes jobs from them: fast lane, then normal."""
    return [fast_lane(queue), queue]


def yield_to_fast_lane(rest: Sequence[Any], *, started: float) -> bool:
    """Between the runs of a normal-lane job (that began at monotonic `started`): when a fast-lane job waits,
    hand the runs not begun yet (`rest`) to a new job at the front of the normal queue and return True, and
    the caller ends its job; a NaN run then waits for one run's turn, not a whole job of 32 runs. Their
    `queued` flags stay set (no job has begun reading them), so what the dispatcher acknowledges as covered
    meanwhile is read by the new job; their feed entries stay pending until it acknowledges them. Not before
    YIELD_AFTER_S, so that a stream of urgent jobs cannot cut normal jobs down to one run each."""
    job = get_current_job()
    if not rest or job is None or job.origin.endswith(FAST_QUEUE_SUFFIX) or time.monotonic() - started < YIELD_AFTER_S:
        return False
    if not Queue(fast_queue_name(job.origin), connection=job.connection).count:
        return False
    Queue(job.origin, connection=job.connection).enqueue_call(
        job.func, args=([list(item) for item in rest],), timeout=None if job.timeout is None else int(job.timeout),
        result_ttl=job.result_ttl, failure_ttl=job.failure_ttl, description=job.description, at_front=True,
    )  # fmt: skip
    return True

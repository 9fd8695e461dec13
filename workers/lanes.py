"""The workers' two queues: the fast lane, for runs with an event that can only mean trouble
(events/urgency.py), and the normal one. A worker listens to both, the fast lane first (RQ takes its
queues in order), so a NaN run's job never waits behind the backlog of routine metrics."""

from __future__ import annotations

from rq import Queue
from trainwarden.workers.config import FAST_QUEUE_SUFFIX


def fast_queue_name(queue: str) -> str:
    """`<queue>-fast`: the fast lane of the queue named `queue`."""
    return f"{queue}{FAST_QUEUE_SUFFIX}"


def fast_lane(queue: Queue) -> Queue:
    return Queue(fast_queue_name(queue.name), connection=queue.connection)


def lanes(queue: Queue) -> list[Queue]:
    """The queues a worker of `queue` serves, in the order it takes jobs from them: fast lane, then normal."""
    return [fast_lane(queue), queue]

"""A dispatcher with a fake clock and an in-process RQ worker: run a run's jobs to quiescence,
ticks included, at whatever time the test sets."""

from __future__ import annotations

from collections.abc import Callable

import redis
from rq import Queue, SimpleWorker
from trainwarden.events.store import EventStore
from trainwarden.workers.dispatcher import Dispatcher
from trainwarden.workers.lanes import lanes
from trainwarden.workers.schedule import Ticker


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def settler(store: EventStore, r: redis.Redis, clock: FakeClock, *, queue_name: str) -> Callable[[], None]:
    """`settle()`: dispatch what is due (ticks by `clock`) and run every job, until nothing is left."""
    queue = Queue(queue_name, connection=r)
    dispatcher = Dispatcher(store=store, queue=queue, consumer="d1", reclaim_idle_ms=100, tick_check_s=0,
                            ticker=Ticker(store=store, host="disp", retry_s=900, clock=clock))  # fmt: skip
    dispatcher.setup()

    def settle() -> None:
        while dispatcher.step() or queue.count:
            SimpleWorker(lanes(queue), connection=r).work(burst=True, logging_level="WARNING")

    return settle

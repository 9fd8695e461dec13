"""RQ workers that ride out a Redis outage (a restart, a failover) instead of quitting.

RQ's own work loop retries only the blocking dequeue, and only on a lost connection. Every other
Redis call of the loop (the worker heartbeat, the state, the suspension check, the registries'
maintenance, a job's bookkeeping before and after it runs, the forking worker's job heartbeat) lets a
`ConnectionError` escape to `Worker.work`, which logs "found an unhandled exception, quitting..." and
returns: the process stays up no longer, and the runs it served go unwatched; a Redis that refuses
writes (out of memory) fails the dequeue too. Here those calls wait for Redis with the
backoff every daemon uses (events/loop.py) and then carry on.

A job that Redis failed in the middle is not redone here: once Redis answers, it is recorded as
failed, and its runs are processed again by a later job, because the feed entries it did not
acknowledge stay pending and the dispatcher gives them a new job after `reclaim_idle_s`. Every
job is safe to redo (workers/process.py commits under WATCH).

RQ's loop also beats before and after every job, three round trips a beat; a worker here beats at most
once a second unless RQ names its own timeout (the key lives 480 s), which took a quarter off RQ's own
CPU a job (bench/rq_floor.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from rq import Queue, SimpleWorker, Worker
from rq.exceptions import InvalidJobOperation, StopRequested
from rq.job import Job, JobStatus
from rq.worker.base import BaseWorker, WorkerStatus
from trainwarden.events.loop import Outage
from trainwarden.events.redis_errors import describe, transient

log = logging.getLogger(__name__)

T = TypeVar("T")

HEARTBEAT_EVERY_S = 1.0  # RQ beats 2-5 times a job, 3 round trips each; its key lives worker_ttl + 60 s (480 s)


class OutageTolerant(BaseWorker):
    """Mixin (before an RQ worker class): the work loop's Redis calls wait through an outage."""

    stop_asked = False  # a SIGINT/SIGTERM asked this worker to stop (else a loop that ends is a fault)
    _beat_at = -HEARTBEAT_EVERY_S  # monotonic time of the last heartbeat sent on its own

    def _through_outage(self, what: str, call: Callable[[], T]) -> T:
        outage = Outage(f"worker {self.name}: {what}")
        while True:
            try:
                result = call()
            except Exception as exc:
                if not transient(exc):
                    raise
                if self.stop_asked:
                    raise StopRequested from exc  # stopping: do not wait for Redis
                time.sleep(outage.failed(exc))
                continue
            outage.succeeded()
            return result

    def request_stop(self, signum: Any, frame: Any) -> None:
        self.stop_asked = True
        super().request_stop(signum, frame)

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is not None:  # only queued on the caller's pipeline
            super().heartbeat(timeout, pipeline)
            return
        if timeout is None and time.monotonic() - self._beat_at < HEARTBEAT_EVERY_S:
            return  # RQ's loop beats before and after every job: 40% of its round trips a job
        beat = super().heartbeat
        self._through_outage("send the worker heartbeat", lambda: beat(timeout))
        self._beat_at = time.monotonic()

    def set_state(self, state: Any, pipeline: Any = None) -> None:
        if pipeline is not None:
            super().set_state(state, pipeline)
            return
        set_state = super().set_state
        self._through_outage("record the worker state", lambda: set_state(state))

    def check_for_suspension(self, burst: bool) -> None:
        check = super().check_for_suspension
        self._through_outage("check for suspension", lambda: check(burst))

    def dequeue_job_and_maintain_ttl(self, timeout: int | None, max_idle_time: int | None = None) -> Any:
        """RQ retries its blocking dequeue on a lost connection only; Redis out of memory refuses the BLMOVE
        too (it is a write), which ended RQ's loop: wait that out like the rest."""
        dequeue = super().dequeue_job_and_maintain_ttl
        return self._through_outage("take a job from the queue", lambda: dequeue(timeout, max_idle_time))

    def run_maintenance_tasks(self) -> None:
        self._through_outage("clean the job registries", super().run_maintenance_tasks)

    def set_shutdown_requested_date(self) -> None:
        try:
            super().set_shutdown_requested_date()
        except Exception as exc:  # called from a signal handler: never let an outage turn a stop into a crash
            if not transient(exc):
                raise

    def maintain_heartbeats(self, job: Job, execution: Any) -> None:
        """The forking worker's beat while its work horse runs: skipped while Redis is away (the horse goes on)."""
        try:
            super().maintain_heartbeats(job, execution)
        except Exception as exc:
            if not transient(exc):
                raise
            log.warning("worker %s: job heartbeat skipped: %s", self.name, describe(exc))

    def execute_job(self, job: Job, queue: Queue) -> None:
        try:
            super().execute_job(job, queue)
        except Exception as exc:
            if not transient(exc):
                raise
            self._settle(job, queue, exc)

    def _settle(self, job: Job, queue: Queue, exc: Exception) -> None:
        """After Redis failed a job's bookkeeping: wait for Redis, then record the job failed unless it finished."""
        log.warning("worker %s: Redis failed job %s (%s); its runs get a new job once Redis is back", self.name,
                    job.id, exc)  # fmt: skip
        self._through_outage("reach Redis", self.connection.ping)
        execution = next((e for e in self.executions.values() if e.job_id == job.id), None)
        try:
            status = self._through_outage("read a job's status", lambda: job.get_status(refresh=True))
        except InvalidJobOperation:  # gone: it finished and its result expired
            status = JobStatus.FINISHED
        if status not in (JobStatus.FINISHED, JobStatus.FAILED):
            self._through_outage(
                "record a failed job",
                lambda: self.handle_job_failure(
                    job, queue, exc_string=f"Redis failed the job: {describe(exc)}", execution=execution
                ),
            )
        if execution is not None:
            self.executions.pop(execution.id, None)
        self.set_state(WorkerStatus.IDLE)

    def unsubscribe(self) -> None:
        """Stop listening for RQ's commands without waiting on the listener: redis-py 8's stop() joins its
        thread, which, once the UNSUBSCRIBE reply is read, waits up to RQ's 60 s for a new subscription; a
        SIGTERM then took that long, and supervisors and tests kill -9 sooner. The thread is a daemon."""
        if self.pubsub_thread:
            self.pubsub.unsubscribe()
            self.pubsub_thread.stop(timeout=1)

    def teardown(self) -> None:
        try:
            super().teardown()
        except Exception as exc:
            if not transient(exc):
                raise
            log.warning("worker %s: could not record its end: %s", self.name, describe(exc))


class InProcessWorker(OutageTolerant, SimpleWorker):
    """`trainwarden worker`: jobs run in this process."""


class ForkingWorker(OutageTolerant, Worker):
    """`trainwarden worker --fork`: each job in a forked work horse."""

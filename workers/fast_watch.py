"""Fast-lane jobs a worker took but never began are dispatched again (issue #38 item 6).

Workers wait for jobs in Redis's BLPOP line, and Redis hands the next job to the first in line whether or
not that process runs: a worker paused there (SIGSTOP, a VM pause, swapping) swallowed the fast-lane job,
and the NaN run waited for the dispatcher's reclaim of its feed entries (`reclaim_idle_s`, 49-57 s
measured) while another worker sat idle. So the dispatcher keeps each fast job it enqueued in view for
`FAST_START_S`: a job still `queued` then, yet no longer in its queue, was taken and not begun. It is
deleted (a worker that thaws finds no job and waits for the next one) and a copy goes to the front of the
fast lane, where the next worker in line takes it. A job still in the queue is waiting its turn (every
worker busy): it is looked at again later, not copied.

A copy is safe even when the first job did run after all: a turn is idempotent (run locks, the WATCHed
checkpoint, the log read after its last entry), so the second finds nothing new and appends nothing.
This watch is the dispatcher's, in memory: a dispatcher that restarts forgets it, and the reclaim of
unacknowledged feed entries remains the slower net. Only the fast lane is watched: a normal job's runs are
not urgent, and the reclaim brings them back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rq import Queue
from rq.exceptions import InvalidJobOperation
from rq.job import Job, JobStatus
from trainwarden.events.store import redis_errors
from trainwarden.workers.config import FAST_START_S

log = logging.getLogger(__name__)

MAX_COPIES = 3  # copies of one job (each swallowed by another paused worker): then the reclaim takes over
FORGET_AFTER_S = 3600.0  # a job waiting in its queue this long (no worker at all) is no longer watched


@dataclass(slots=True)
class Watched:
    job: Job
    due: float  # monotonic: when to look at it next
    since: float  # monotonic: when it was enqueued
    copies: int  # copies made before it (0: the dispatcher's own job)

    @property
    def work(self) -> list[tuple[str, list[str]]]:
        """The job's (run, feed entry ids), as the dispatcher gave them (`process_runs`'s argument)."""
        items: Sequence[Any] = self.job.args[0]
        return [(str(run), list(fids)) for run, fids in items]


@dataclass(slots=True)
class FastWatch:
    """The fast-lane jobs a dispatcher enqueued, until each is seen begun (or finished and gone)."""

    queue: Queue | None  # the fast lane (None until the dispatcher first sends a fast job)
    start_s: float = FAST_START_S
    watched: list[Watched] = field(default_factory=list)

    def add(self, jobs: Sequence[Job], now: float, *, copies: int = 0) -> None:
        self.watched.extend(Watched(job, now + self.start_s, now, copies) for job in jobs)

    def next_due(self) -> float | None:
        return min((w.due for w in self.watched), default=None)

    def unstarted(self, now: float) -> list[Watched]:
        """The watched jobs due for a look that a worker took but did not begin; each is deleted, for the
        caller to enqueue a copy of. Jobs begun, finished or failed are forgotten."""
        keep: list[Watched] = []
        lost: list[Watched] = []
        for w in self.watched:
            if now < w.due:
                keep.append(w)
                continue
            with redis_errors("see whether a fast-lane job began"):
                state = self._state(w.job)
                if state == "waiting" and now - w.since < FORGET_AFTER_S:
                    w.due = now + self.start_s
                    keep.append(w)
                elif state == "taken":
                    if w.copies >= MAX_COPIES:
                        log.warning("fast-lane job %s was taken and not begun %d times; its feed entries are "
                                    "reclaimed after reclaim_idle_s", w.job.id, w.copies + 1)  # fmt: skip
                        continue
                    w.job.delete()  # a worker that thaws with it finds no job, and takes the next
                    lost.append(w)
        self.watched = keep
        return lost

    def _state(self, job: Job) -> str:
        """Where `job` is: "taken" (out of the queue, not begun), "waiting" (in the queue) or "begun" (or gone)."""
        try:
            status = job.get_status(refresh=True)
        except InvalidJobOperation:  # finished: RQ deleted it (no result kept)
            return "begun"
        if status != JobStatus.QUEUED:
            return "begun"
        in_line = self.queue is not None and self.queue.get_job_position(job.id) is not None
        return "waiting" if in_line else "taken"

"""Errors of the workers.

TrainwardenError (events.errors)
└── WorkerError
    ├── NoWorkerContext     a job ran in a process that `trainwarden worker` did not set up
    ├── RunBusy             another worker holds the run's lock for too long (retryable)
    └── RunsFailed          some runs of a multi-run job failed (their feed entries are retried)

Launching and stopping runs raise remote/errors.py's errors; archiving, archive/errors.py's.
"""

from __future__ import annotations

from trainwarden.events.errors import TrainwardenError


class WorkerError(TrainwardenError):
    """Base class of errors raised by the workers."""


class NoWorkerContext(WorkerError):
    """Jobs need the context `trainwarden worker` installs (Redis, policy, run controller)."""


class RunBusy(WorkerError):
    """The run's lock is held by another job; the feed entry stays pending and is retried."""

    retryable = True


class RunsFailed(WorkerError):
    """Runs of a multi-run job that failed, with why; the others were processed and acknowledged."""

    retryable = True

    def __init__(self, failed: dict[str, str]) -> None:
        self.failed = failed
        listed = "; ".join(f"{run}: {why}" for run, why in list(failed.items())[:5])
        more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
        super().__init__(f"{len(failed)} run(s) failed, their feed entries are retried: {listed}{more}")

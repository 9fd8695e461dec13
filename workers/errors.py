"""Errors of the workers (the whole tree is drawn in core/errors.py).

TrainwardenError (trainwarden.core.errors)
└── WorkerError             the RQ jobs
    ├── NoWorkerContext     a job ran in a process that `trainwarden worker` did not set up
    ├── NoValidPolicy       the policy file is invalid at start and no valid policy was ever recorded
    ├── RunBusy             another worker holds the run's lock for too long (the entry is retried)
    ├── RunsFailed          some runs of a multi-run job failed (their feed entries are retried)
    └── UnknownAction       a pending action of a kind no class declares (logged and dropped)

Launch, stop and SSH errors are in remote/errors.py, archive errors in archive/errors.py.
"""

from __future__ import annotations

from trainwarden.core.errors import TrainwardenError


class WorkerError(TrainwardenError):
    """Base class of errors raised by the workers."""


class NoWorkerContext(WorkerError):
    """Jobs need the context `trainwarden worker` installs (Redis, policy, run controller)."""


class NoValidPolicy(WorkerError):
    """The policy file is invalid at worker start and Redis holds no valid policy to start with instead."""


class RunBusy(WorkerError):
    """The run's lock is held by another job; the feed entry stays pending and is retried."""


class RunsFailed(WorkerError):
    """Runs of a multi-run job that failed, with why; the others were processed and acknowledged."""

    def __init__(self, failed: dict[str, str]) -> None:
        self.failed = failed
        listed = "; ".join(f"{run}: {why}" for run, why in list(failed.items())[:5])
        more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
        super().__init__(f"{len(failed)} run(s) failed, their feed entries are retried: {listed}{more}")


class UnknownAction(WorkerError):
    """A checkpoint's pending action of a kind no class in workers/pending.py declares (written by a newer
    worker, or corrupted): it cannot be carried out, so it is logged and dropped."""

    def __init__(self, kind: object, known: list[str]) -> None:
        self.kind = kind
        super().__init__(f"unknown pending action kind {kind!r} (known: {', '.join(known)}); a newer worker may have "
                         "written it: upgrade this worker, or stop the run by hand if it was a stop")  # fmt: skip

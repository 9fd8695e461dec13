"""Errors of the workers.

TrainwardenError (events.errors)
└── WorkerError
    ├── NoWorkerContext     a job ran in a process that `trainwarden worker` did not set up
    ├── RunBusy             another worker holds the run's lock for too long (retryable)
    ├── RunsFailed          some runs of a multi-run job failed (their feed entries are retried)
    ├── LaunchError         a run could not be started (names the run and the cause)
    ├── StopError           the run controller could not even attempt a stop
    └── ArchiveError        an archive of a run's log could not be completed (nothing was trimmed)
        ├── ArchiveBusy           another archive of the run is in progress
        ├── ArchiveWriteFailed    the file could not be written (disk full, permissions)
        └── ArchiveVerifyFailed   the file read back does not hold what was read from the log
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


class LaunchError(WorkerError):
    """A run could not be launched."""


class StopError(WorkerError):
    """The run controller could not attempt the stop at all."""


class ArchiveError(WorkerError):
    """An archive did not complete; the log was not trimmed, so nothing is lost."""


class ArchiveBusy(ArchiveError):
    """Another archive of the run holds its lease (or took it over from this one)."""


class ArchiveWriteFailed(ArchiveError):
    """The archive file could not be written."""


class ArchiveVerifyFailed(ArchiveError):
    """The archive file read back differs from what was read from the log."""


class PreflightFailed(LaunchError):
    """A preflight check failed; the launch is refused."""


class WandbGuardRefused(LaunchError):
    """The experiment would run with W&B offline or disabled (an offline run is invalid)."""


class SshError(WorkerError):
    """Talking to a server over SSH failed."""


class HostKeyRejected(SshError):
    """The host key is not in known_hosts or differs from it: the connection is refused."""


class SshAuthFailed(SshError):
    """The server refused our key."""


class SshUnreachable(SshError):
    """The server cannot be reached; the operation may be retried."""

    retryable = True


class SshTimeout(SshError):
    """A remote command did not finish in time."""

    retryable = True

"""Errors of remote-run control (launching, stopping, SSH).

TrainwardenError (events.errors)
└── RemoteError
    ├── LaunchError             a run could not be started (names the run and the cause)
    │   ├── PreflightFailed     a preflight check failed; the launch is refused
    │   └── WandbGuardRefused   the experiment would run with W&B offline or disabled
    ├── StopError               the run controller could not even attempt a stop
    └── SshError                talking to a server over SSH failed
        ├── HostKeyRejected     the host key is unknown or differs from known_hosts
        ├── SshAuthFailed       the server refused our key
        ├── SshUnreachable      the server cannot be reached (retryable)
        └── SshTimeout          a remote command did not finish in time (retryable)
"""

from __future__ import annotations

from trainwarden.events.errors import TrainwardenError


class RemoteError(TrainwardenError):
    """Base class of errors raised while launching, stopping or reaching runs."""


class LaunchError(RemoteError):
    """A run could not be launched."""


class PreflightFailed(LaunchError):
    """A preflight check failed; the launch is refused."""


class WandbGuardRefused(LaunchError):
    """The experiment would run with W&B offline or disabled (an offline run is invalid)."""


class StopError(RemoteError):
    """The run controller could not attempt the stop at all."""


class SshError(RemoteError):
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

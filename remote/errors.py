"""Errors of launching, stopping and reaching runs (the whole tree is drawn in core/errors.py).

TrainwardenError (trainwarden.core.errors)
└── RemoteError                 launching, stopping and reaching runs on servers
    ├── LaunchError             a run could not be started (names the run and the cause)
    │   ├── PreflightFailed     a preflight check failed (says the fix)
    │   ├── WandbGuardRefused   the run would log to W&B offline or not at all
    │   └── PlanHeld            a plan holds the experiment back (a parent has not finished)
    ├── StopError               the run controller could not even attempt a stop
    ├── WandbUnreachable        `collect` could not ask W&B for final metrics (no key, no network, no such run)
    └── SshError                talking to a server over SSH failed
        ├── HostKeyRejected     the host key is unknown or changed (says how to check and add it)
        ├── SshAuthFailed       the server refused our key
        ├── SshUnreachable      the server cannot be reached (callers may try again later)
        └── SshTimeout          a remote command did not finish in time
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainwarden.core.errors import TrainwardenError

if TYPE_CHECKING:
    from trainwarden.remote.plan_gate import PlanHold


class RemoteError(TrainwardenError):
    """Base class of errors raised while launching, stopping or reaching runs."""


class LaunchError(RemoteError):
    """A run could not be launched."""


class PreflightFailed(LaunchError):
    """A preflight check failed; the launch is refused."""


class WandbGuardRefused(LaunchError):
    """The experiment would run with W&B offline or disabled (an offline run is invalid)."""


class PlanHeld(LaunchError):
    """A plan holds the experiment back; `hold` says which plan and parent (remote/plan_gate.py)."""

    def __init__(self, message: str, *, run: str, hold: PlanHold) -> None:
        super().__init__(message, run=run)
        self.hold = hold


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


class SshTimeout(SshError):
    """A remote command did not finish in time."""


class WandbUnreachable(RemoteError):
    """W&B could not be asked for a run's final metrics: no key, no network, no such run (the message says)."""

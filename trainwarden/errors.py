"""Errors of the composition root (settings, CLI, demo).

TrainwardenError (events.errors)
└── SetupError              something around trainwarden is missing or misconfigured
    ├── ConfigError         the settings file or environment is invalid (names file:line)
    ├── RedisServerError    a private redis-server could not be started
    ├── DemoError           the demo's run did not go as it should
    ├── UsageError          a command-line argument is invalid (says what was expected)
    ├── UnknownRun          a command names a run that has no events
    ├── ArchiveNotFound     a run's history is in archive files that are not on this machine
    ├── PolicyNotRecorded   replay --verify needs a policy whose text the log does not hold
    └── SourceUnavailable   a backtest source this build cannot read (yet)
SimulateError               a `trainwarden simulate` producer process failed
"""

from __future__ import annotations

from trainwarden.events.errors import TrainwardenError


class SetupError(TrainwardenError):
    """Something outside trainwarden's code needs fixing before it can run."""


class ConfigError(SetupError):
    """The settings file or environment is invalid."""


class RedisServerError(SetupError):
    """A private redis-server could not be started."""


class DemoError(SetupError):
    """The demo's vertical slice did not complete."""


class UsageError(SetupError):
    """A command-line argument is invalid."""


class UnknownRun(SetupError):
    """The run has no events in the log."""

    def __init__(self, run: str) -> None:
        super().__init__(f"unknown run {run!r}: it has no events (see `trainwarden runs`)")


class ArchiveNotFound(SetupError):
    """The run's events were archived to files this machine does not have (the message names them)."""


class PolicyNotRecorded(SetupError):
    """A decision names a policy hash whose text is not in the `trainwarden.system` run's `policy.loaded` events."""


class SourceUnavailable(SetupError):
    """The history source asked for cannot be read by this build."""


class SimulateError(TrainwardenError):
    """A `trainwarden simulate` producer process failed (its traceback is in its output)."""

"""Errors of the composition root (settings, CLI, demo).

TrainwardenError (events.errors)
└── SetupError              something around trainwarden is missing or misconfigured
    ├── ConfigError         the settings file or environment is invalid (names file:line)
    ├── RedisServerError    a private redis-server could not be started
    └── DemoError           the demo's run did not go as it should
"""

from __future__ import annotations

from events.errors import TrainwardenError


class SetupError(TrainwardenError):
    """Something outside trainwarden's code needs fixing before it can run."""


class ConfigError(SetupError):
    """The settings file or environment is invalid."""


class RedisServerError(SetupError):
    """A private redis-server could not be started."""


class DemoError(SetupError):
    """The demo's vertical slice did not complete."""

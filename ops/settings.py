"""What the operations read of the settings: a Protocol that trainwarden.settings.Settings meets.

The settings live in the composition root, which nothing below it may import; an operation asks only for
the fields it reads, so each interface passes the Settings it loaded, unchanged.
"""

from __future__ import annotations

from typing import Protocol


class OpsSettings(Protocol):
    @property
    def host(self) -> str:
        """This host's name: the host of every event an operation appends."""
        ...

    @property
    def check_interval_s(self) -> float:
        """A training-check report's Next check, when the caller gives no interval."""
        ...

    @property
    def agent_wandb_stale_s(self) -> float:
        """How old W&B data may be before a report says the run fell back to its log."""
        ...

"""Errors of the policy language.

TrainwardenError (trainwarden.core.errors)
└── PolicyError             a policy file that does not validate; lists every problem as file:line:column
"""

from __future__ import annotations

from collections.abc import Sequence

from trainwarden.core.errors import TrainwardenError


class PolicyError(TrainwardenError):
    """A policy that cannot be used. `problems` holds one `file:line:column: message` per error."""

    def __init__(self, problems: Sequence[str], *, source: str) -> None:
        self.problems = list(problems)
        self.source = source
        count = f"{len(self.problems)} problem" + ("s" if len(self.problems) != 1 else "")
        super().__init__(f"invalid policy {source} ({count}):\n" + "\n".join(f"  {p}" for p in self.problems))

"""What a launch says when its command ended within its first seconds: the same words for a local
launch and one over SSH. (A plan's refusal is said by remote/plan_gate.py, which the launcher uses.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from trainwarden.bot.messages import exit_status

if TYPE_CHECKING:
    from trainwarden.remote.first_seconds import EarlyExit


def failed_at_launch(run: str, early: EarlyExit, log: str) -> list[str]:
    """The head ("retF exited with code 3 within 1 s of launch; log: ...; last lines:"), then those lines."""
    within = f" within {max(1, round(early.after_s))} s of launch" if early.after_s is not None else " at once"
    head = f"{run} {exit_status(early.code)}{within}; log: {log}" + ("; last lines:" if early.tail else " (empty)")
    return [head, *indented(early.tail)]


def indented(lines: Sequence[str]) -> list[str]:
    return [f"  {line}" for line in lines]

"""What a launch says when its command ended within its first seconds: the same words for a local
launch and one over SSH. (A plan's refusal is said by remote/plan_gate.py, which the launcher uses.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from trainwarden.core.words import exit_status

if TYPE_CHECKING:
    from trainwarden.remote.first_seconds import EarlyExit


def failed_at_launch(run: str, early: EarlyExit, log: str) -> list[str]:
    """The head ("retF exited with code 3 within 1 s of launch; log: ...; last lines:"), then those lines."""
    within = f" within {max(1, round(early.after_s))} s of launch" if early.after_s is not None else " at once"
    head = f"{run} {exit_status(early.code)}{within}; log: {log}" + ("; last lines:" if early.tail else " (empty)")
    return [head, *indented(early.tail)]


def indented(lines: Sequence[str]) -> list[str]:
    return [f"  {line}" for line in lines]


def interrupted(run: str, *, started: bool, log: str | None = None) -> str:
    """Ctrl-C during `trainwarden launch`: whether the run is going (it was recorded, so the agent follows it) or
    nothing was started, and what to do next."""
    if not started:
        return f"interrupted: {run} was not started (nothing was recorded, nothing runs)"
    where = f"; log: {log}" if log else ""
    return (
        f"interrupted: {run} was started and is being followed; Ctrl-C only cut short the check for a command "
        f"that fails at once{where}. `trainwarden check {run}` for its state, `trainwarden stop {run}` to stop it"
    )


def holding(run: str) -> str:
    """A Ctrl-C while a run is started and recorded (one step): why the command does not stop at once."""
    return f"trainwarden: Ctrl-C: starting {run} and recording it are one step; it ends in a moment"

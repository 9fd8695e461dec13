"""What a launch says when it does not start a healthy run: a plan holds the experiment back, or
the command ended within its first seconds. The same words on the console and in Slack."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from trainwarden.bot.messages import exit_status

if TYPE_CHECKING:  # remote/ needs asyncssh; these only name its types
    from trainwarden.remote.first_seconds import EarlyExit
    from trainwarden.remote.plan_gate import PlanHold


def clock(ts: float) -> str:
    return time.strftime("%H:%M", time.localtime(ts))


def plan_held(hold: PlanHold) -> str:
    """The reason alone: "exp3 waits for exp2 in plan P (exp2 is running since 10:02)"."""
    exp, parent, state = hold.experiment, hold.parent, hold.parent_state
    if not hold.blocked:
        since = f" since {clock(hold.since)}" if hold.since is not None else ""
        return f"{exp} waits for {parent} in plan {hold.plan} ({parent} is {state}{since})"
    what = {
        "stopped": f"was stopped by {hold.detail}" if hold.detail else "was stopped",
        "failed": "failed",
        "blocked": f"is blocked too ({hold.detail})" if hold.detail else "is blocked too",
        "refused": f"was refused at launch ({hold.detail})" if hold.detail else "was refused at launch",
    }.get(state, state)
    return f"{exp} is blocked in plan {hold.plan}: {parent} {what}"


def plan_refusal(hold: PlanHold, force: str) -> str:
    """The reason and the fix; `force` is the command that launches it anyway, in the caller's words."""
    wait = "wait" if not hold.blocked else f"fix {hold.parent} and run the plan again"
    return f"{plan_held(hold)}; {wait}, or `{force}` to launch outside the plan"


def failed_at_launch(run: str, early: EarlyExit, log: str) -> list[str]:
    """The head ("retF exited with code 3 within 1 s of launch; log: ...; last lines:"), then those lines."""
    within = f" within {max(1, round(early.after_s))} s of launch" if early.after_s is not None else " at once"
    head = f"{run} {exit_status(early.code)}{within}; log: {log}" + ("; last lines:" if early.tail else " (empty)")
    return [head, *indented(early.tail)]


def indented(lines: Sequence[str]) -> list[str]:
    return [f"  {line}" for line in lines]

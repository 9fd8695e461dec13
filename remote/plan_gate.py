"""Does a plan hold an experiment back, and how is that said? Every launch outside a plan runner
(CLI, /launch) asks first. Pure.

The plan that governs an experiment is the newest started plan that lists it, so a plan run again
after a fix supersedes the old one's blocks. In it, an experiment the plan has not launched yet is
held while a parent has not finished (it waits), and for good once a parent failed, was stopped,
blocked or refused (it is blocked). An experiment the plan launched or ended is not held. A
parent's state comes from its own run log when that is newer than the plan's record (the plan
runner may not be running to record that it ended).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from trainwarden.events import types as t
from trainwarden.events.projection import RunState
from trainwarden.remote.plan import NOT_FINISHED, PlanState, run_status

HELD = frozenset({"pending", "blocked"})  # the experiment's own states in which its plan may hold it


@dataclass(frozen=True, slots=True)
class PlanHold:
    plan: str
    experiment: str
    parent: str  # the first parent that has not finished
    parent_state: str  # pending | launching | running | failed | stopped | blocked | refused
    since: float | None  # when the plan recorded the parent's state
    detail: str = ""  # stopped: by whom; blocked or refused: the plan's reason

    @property
    def blocked(self) -> bool:
        """True: waiting will not help (a parent did not finish); False: it waits for a parent."""
        return self.parent_state in NOT_FINISHED


def governing(experiment: str, plans: Mapping[str, PlanState]) -> str | None:
    """The newest started plan that lists `experiment`."""
    listed = [(s.started_at or 0.0, name) for name, s in plans.items() if experiment in s.depends_on]
    return max(listed)[1] if listed else None


def parent_state(parent: str, state: PlanState, run: RunState | None) -> str:
    ps = state.state_of(parent)
    if run is None or ps in ("pending", "launching") or run.launch_seq is None:
        return ps
    bound = int(state.steps.get(parent, {}).get("launch_seq") or int((state.started_at or 0.0) * 1e6))
    if run.launch_seq < bound:
        return ps  # no launch of it since the plan's own
    now = run_status(run, since_seq=bound)
    return "finished" if now == "finished" else now if ps == "running" else ps


def stopped_by(run: RunState | None) -> str:
    asked = [s for s in (run.stops if run else []) if s.get("type") == t.STOP_REQUESTED]
    if not asked:
        return ""
    last = asked[-1]
    return str(last.get("rule") or last.get("user") or last.get("by") or "")


def plan_hold(experiment: str, plan: str, state: PlanState, runs: Mapping[str, RunState]) -> PlanHold | None:
    """Why `plan` holds `experiment` back now; None when it does not."""
    if state.state_of(experiment) not in HELD:
        return None
    for parent in state.depends_on.get(experiment, []):
        now = parent_state(parent, state, runs.get(parent))
        if now == "finished":
            continue
        detail = stopped_by(runs.get(parent)) if now == "stopped" else ""
        if now in ("blocked", "refused"):
            detail = str(state.steps.get(parent, {}).get("reason", ""))
        return PlanHold(plan, experiment, parent, now, state.since.get(parent), detail)
    return None


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

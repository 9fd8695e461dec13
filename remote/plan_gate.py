"""Does a plan hold an experiment back? Every launch outside a plan runner (CLI, /launch) asks first.

Pure. The plan that governs an experiment is the newest started plan that lists it, so a plan run
again after a fix supersedes the old one's blocks. In it, an experiment the plan has not launched
yet is held while a parent has not finished (it waits), and for good once a parent failed, was
stopped, blocked or refused (it is blocked). An experiment the plan launched or ended is not held.
A parent's state comes from its own run log when that is newer than the plan's record (the plan
runner may not be running to record that it ended).
"""

from __future__ import annotations

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

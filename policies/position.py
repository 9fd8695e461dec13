"""Where a run is, for the engine: its launch, its step, its evals and its plan, folded from its events. Pure.

A launch starts the state over; a metric event moves the step (a step back at the run's first after the run moved
on is a run started over in the same log: judged as a new one) and folds the plan it states; an eval counts once
(the last eval carried on a training line is no new eval).
"""

from __future__ import annotations

from typing import Any, cast

from trainwarden.core import plan
from trainwarden.core.metrics import is_validation
from trainwarden.events.envelope import Event
from trainwarden.events.payloads import RunLaunchedData
from trainwarden.policies.kinds.values import has_training_value
from trainwarden.policies.state import PolicyState


def reset(state: PolicyState, event: Event) -> None:
    """A launch (not a resume) is judged from scratch, under its own config and plan."""
    config = cast(RunLaunchedData, event.data).get("config")
    state.launch_seq = event.seq
    state.decision = None
    state.now = event.ts if state.now is None else max(state.now, event.ts)
    state.ended = False
    state.stop_asked = None
    state.step = None
    state.config = dict(config) if isinstance(config, dict) else {}
    state.kept = {}
    state.plan = plan.from_config(state.config)
    start_over(state, event.ts)


def place(state: PolicyState, data: Any, now: float) -> None:
    """A metric event's position and plan into the run's state (a step back at the first: the run started over)."""
    if "step" in data:
        if started_over(state, data["step"]):
            start_over(state, now)
        state.step = data["step"]
        if state.first_step is None:
            state.first_step = state.step
    plan.fold(state.plan, data)


def carried(state: PolicyState, data: Any) -> bool:
    """Whether an event's eval values are the last eval's, carried on a training step's line (`step 120 loss 0.52
    val_loss 0.61` on every step between two evals); an eval printed on its own counts, whatever it scored."""
    evals = sorted([k, v] for k, v in data.items() if is_validation(k))
    carried = evals == state.last_eval and has_training_value(data)
    state.last_eval = evals
    return carried


def started_over(state: PolicyState, step: Any) -> bool:
    """Whether a metric's step is back at the run's first after the run moved on: the training started again
    from scratch in the same log (a relaunch appended to it, `Epoch [1/50]` a second time). A resume goes
    back to its checkpoint's step, past the first, and carries on."""
    first, last = state.first_step, state.step
    return type(step) is int and type(first) is int and type(last) is int and step <= first < last


def start_over(state: PolicyState, now: float) -> None:
    """A run that started again is judged as a new one: its bests, evals and windows are the new run's (the
    first run's best would make every eval of the second a regression)."""
    state.rules = {}
    state.deciding = {}
    state.first_step = None
    state.evals = 0
    state.primary = None
    state.last_eval = None
    state.start = now

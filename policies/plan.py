"""The run's planned length, for rules whose patience is a share of the run (core/plan.py reads it; the engine
folds it into `PolicyState.plan` from the launch config and the metric events).

A kind sees only its own events: one that declares `planned = True` gets the run's progress from the engine in
`st["progress"]` before each `observe` ([share_done, evals, class count]; policies/model.py `Kind`)."""

from __future__ import annotations

from trainwarden.core.plan import share
from trainwarden.policies.state import PolicyState


def share_done(state: PolicyState) -> float | None:
    """How much of its planned length the run has done (0..1), or None when neither its log nor its launch config
    says how long it is (or what they say does not fit its position)."""
    return share(state.plan, state.step)

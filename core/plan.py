"""The run's planned length and task size, as its log or its launch config states them: pure.

The agent reads them from the lines that say them (`Epoch [3/10]`, `Num Epochs = 3`, `max_steps=5000`,
`Total optimization steps = 500`, a training bar's total, `Number of classes: 10`: agent/plan_lines.py)
and sends each, once and when it changes, in the data of a metric event under `PLAN_KEYS`; the launch
config (`run.launched`'s `config`) may say them too (`CONFIG_KEYS`). The policies fold them into the run's
state (policies/plan.py) so that a rule's patience can be a share of the run's own length, and a chance
level needs the class count to be stated rather than guessed.

A plan is a small dict: `total_steps`, `total_epochs`, `num_classes` (each when known) and `epoch`, the
latest epoch an event was at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOTAL_STEPS, TOTAL_EPOCHS, NUM_CLASSES = "total_steps", "total_epochs", "num_classes"
PLAN_KEYS = frozenset({TOTAL_STEPS, TOTAL_EPOCHS, NUM_CLASSES})  # facts about the run, never a metric
# launch-config spellings (top level or under `params`) -> the plan key they state
CONFIG_KEYS: dict[str, str] = {
    "total_steps": TOTAL_STEPS, "max_steps": TOTAL_STEPS, "num_steps": TOTAL_STEPS, "train_steps": TOTAL_STEPS,
    "epochs": TOTAL_EPOCHS, "max_epochs": TOTAL_EPOCHS, "num_epochs": TOTAL_EPOCHS, "num_train_epochs": TOTAL_EPOCHS,
    "num_classes": NUM_CLASSES, "n_classes": NUM_CLASSES, "num_labels": NUM_CLASSES, "nb_classes": NUM_CLASSES,
}  # fmt: skip
OVERRUN = 1.1  # a position this far past the planned end: the plan read is not this run's (a bar's total per epoch)


def _whole(value: Any) -> int | None:
    """A positive whole count (`10`, `10.0`), else None (`-1`: max_steps unset, a bool, a string)."""
    if type(value) is int or (type(value) is float and value.is_integer()):
        n = int(value)
        return n if n > 0 else None
    return None


def from_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The plan a launch config states: its top level, then its `params` (an experiment's)."""
    plan: dict[str, Any] = {}
    params = config.get("params")
    for node in (config, params if isinstance(params, Mapping) else {}):
        for key, target in CONFIG_KEYS.items():
            n = _whole(node.get(key))
            if n is not None and target not in plan:
                plan[target] = n
    return plan


def fold(plan: dict[str, Any], data: Mapping[str, Any]) -> None:
    """Fold one metric event's data into `plan` (in place): the plan keys it carries and the epoch it is at."""
    if not PLAN_KEYS.isdisjoint(data):  # rare: once per fact the run states
        for key in PLAN_KEYS.intersection(data):
            n = _whole(data[key])
            if n is not None:
                plan[key] = n
    epoch = data.get("epoch")
    if type(epoch) in (int, float):
        plan["epoch"] = epoch


def share(plan: Mapping[str, Any], step: Any) -> float | None:
    """How much of its planned length the run has done (0..1), or None when the plan does not say or does not
    fit the run (a position past its end). The epoch, when the plan has the epoch count (a fractional epoch
    is exact; a whole one counts the epochs begun), else the step against the total steps."""
    epochs, epoch = plan.get(TOTAL_EPOCHS), plan.get("epoch")
    if epochs and type(epoch) in (int, float):
        done = epoch / epochs
    elif plan.get(TOTAL_STEPS) and type(step) in (int, float):
        done = step / plan[TOTAL_STEPS]
    else:
        return None
    return done if 0 <= done <= OVERRUN else None

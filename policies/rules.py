"""Rule kinds. Each is a frozen dataclass with a pure `check(event)`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from events import types as t
from events.envelope import Event
from policies.model import Finding

LOSS_ALIASES = ("loss", "train/loss", "train_loss", "train.loss", "training_loss")


def first_metric(data: dict[str, Any], names: tuple[str, ...]) -> tuple[str, Any] | None:
    for name in names:
        if name in data:
            return name, data[name]
    return None


def is_nonfinite(value: Any) -> bool:
    return type(value) is float and not math.isfinite(value)


@dataclass(frozen=True, slots=True)
class NonFinite:
    """Fires when the watched metric is NaN or +/-Inf: the run is broken, nothing will recover it."""

    id: str
    metrics: tuple[str, ...] = LOSS_ALIASES
    decision: str | None = t.STOP
    severity: str = "critical"
    remedy: str = "lower the learning rate, add warmup or gradient clipping, and check the data batch"

    def check(self, event: Event) -> Finding | None:
        if event.type != t.METRIC:
            return None
        found = first_metric(event.data, self.metrics)
        if found is None:
            return None
        name, value = found
        values = {name: value}
        step = event.data.get("step")
        if step is not None:
            values["step"] = step
        if not is_nonfinite(value):
            return Finding(rule=self.id, firing=False, values=values)
        where = f" at step {step}" if step is not None else ""
        return Finding(rule=self.id, firing=True, reason=f"{name}={value}{where}", values=values)

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "nonfinite", "metrics": list(self.metrics), "decision": self.decision,
                "severity": self.severity}  # fmt: skip

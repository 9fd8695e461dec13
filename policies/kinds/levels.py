"""Kinds that judge where an eval metric sits: at chance level (chance), or past its best (past_best).

Each keeps a bounded window (`chance`: `count` values) or a few numbers, never the run's history.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from trainwarden.core.metrics import at_step, is_validation
from trainwarden.events.envelope import Event
from trainwarden.policies.kinds.values import METRIC_EVENTS, OneMetric, repeated
from trainwarden.policies.names import finite, fmt


def _level(quantity: str, k: int) -> float:
    """The chance level of a k-way task: a loss of ln k (cross-entropy of uniform guesses), an accuracy of 1/k."""
    return math.log(k) if quantity == "loss" else 1.0 / k


@dataclass(frozen=True, slots=True)
class Chance(OneMetric):
    """A loss sitting at ln k, or an accuracy at 1/k, for `count` values in a row: a k-way classifier
    predicting uniformly (k from 2 to `k_max`).

    A healthy run passes through ln k on its way down, so one value proves nothing: the mean of the last
    `count` values must be within `tolerance` (relative) of the level, and every one of them within
    `spread` (relative) of it (a falling loss leaves that band). The band never reaches halfway to the
    neighbouring levels (ln 999 and ln 1000 are 0.001 apart): a quarter of the gap at most, so the k named
    is the only one the values can mean. A value repeated at its position (a redraw) is no new value."""

    kind: ClassVar[str] = "chance"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    quantity: str = "loss"  # loss: ln k; accuracy: 1/k
    count: int = 10
    tolerance: float = 0.002
    spread: float = 0.01
    k_max: int = 1000
    events: frozenset[str] = METRIC_EVENTS

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the last `count` values (+ "metric", "k", "mean": the name read, the task size and the mean when firing)
        return {"window": []}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        v = finite(event.data[name])
        if v is None or repeated(st, event.data, name, v):
            return None
        window: list[float] = st["window"]
        window.append(v)
        if len(window) > self.count:
            del window[0]
        if len(window) < self.count:
            return False
        mean = sum(window) / len(window)
        if mean <= 0:
            return False
        k = round(math.exp(mean)) if self.quantity == "loss" else round(1.0 / mean)
        if not 2 <= k <= self.k_max:
            return False
        level = _level(self.quantity, k)
        gap = min(abs(level - _level(self.quantity, n)) for n in (k - 1, k + 1) if n >= 1)
        band = min(self.tolerance * level, gap / 4)
        if abs(mean - level) > band or any(abs(x - level) > self.spread * level for x in window):
            return False
        st["metric"], st["k"], st["mean"] = name, k, mean
        return True

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        m, k, mean = st["metric"], st["k"], st["mean"]
        level = f"ln {k}" if self.quantity == "loss" else f"1/{k}"
        what = "evals" if is_validation(m) else "logged steps"
        return (
            f"{m} {mean:.5g} = {level} for {self.count} {what}: predictions at chance for a {k}-way task",
            {m: mean, "k": k, "chance": _level(self.quantity, k)},
        )

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "quantity": self.quantity, "count": self.count,
                "tolerance": self.tolerance, "spread": self.spread, "k_max": self.k_max,
                "event": sorted(self.events)}  # fmt: skip


@dataclass(frozen=True, slots=True)
class PastBest(OneMetric):
    """An eval metric that has not beaten its best for `patience` evals and is now worse than that best by
    more than `min_delta` (relative): overfitting, or an eval that went stale, in any framework's naming
    (a gradient-boosting log's `eval-logloss` rising round after round). The reason names where the best
    was: the round or checkpoint to keep (early stopping). `mode: max` for accuracy-like metrics."""

    kind: ClassVar[str] = "past_best"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    patience: int = 10
    min_delta: float = 0.02
    mode: str = "min"
    events: frozenset[str] = METRIC_EVENTS

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the best value, its step, evals since it (+ "metric", "value": the name read and its latest value)
        return {"best": None, "at": None, "since": 0}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        v = finite(event.data[name])
        if v is None or repeated(st, event.data, name, v):
            return None
        best = st["best"]
        if best is None or (v < best if self.mode == "min" else v > best):
            st["best"], st["at"], st["since"] = v, event.data.get("step"), 0
            return False
        st["since"] += 1
        st["metric"], st["value"] = name, v
        worse = (v - best) if self.mode == "min" else (best - v)
        return st["since"] >= self.patience and worse > self.min_delta * abs(best)

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        m, v, best = st["metric"], st["value"], st["best"]
        change = (v - best) / abs(best) if best else math.inf
        return (
            f"{m} has not beaten its best {fmt(best)} for {st['since']} evals and is "
            f"{fmt(v)} now ({change:+.0%}): early stopping, the best was at {at_step(st['at'])}",
            {m: v, "best": best, "best_step": st["at"]},
        )

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "patience": self.patience, "min_delta": self.min_delta,
                "mode": self.mode, "event": sorted(self.events)}  # fmt: skip

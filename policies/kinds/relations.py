"""Kinds that judge a metric against something else: another metric (divergence), the experiment's
expected baseline (baseline), or the learning-rate schedule (lr_schedule)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from trainwarden.events.envelope import Event
from trainwarden.policies.kinds.values import METRIC_EVENTS, OneMetric, gave_back, repeated
from trainwarden.policies.names import finite, fmt, number, pick


@dataclass(frozen=True, slots=True)
class Divergence:
    """`rising` goes up while `falling` goes down, `count` evaluations of `rising` in a row (overfitting).

    Each evaluation of `rising` compares it with its previous value, and the mean of `falling`
    since then with the mean over the interval before.
    """

    kind: ClassVar[str] = "divergence"
    time_driven: ClassVar[bool] = False
    rising: tuple[str, ...]
    falling: tuple[str, ...]
    count: int = 2
    min_giveback: float = 0.0
    events: frozenset[str] = METRIC_EVENTS

    @property
    def keys(self) -> tuple[str, ...]:
        return self.rising + self.falling

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the `falling` (training) values since the last eval: sum, count, last one (+ "train_metric": its name);
        # at each eval the training mean and the `rising` value (+ "train_mean_before", "val_value_before": the
        # previous eval's, "val_metric": its name); evals in a row it diverged
        return {
            "train_sum": 0.0,
            "train_count": 0,
            "train_last": None,
            "train_mean": None,
            "val_value": None,
            "in_a_row": 0,
        }

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        data = event.data
        if name in self.falling:  # no eval in this event (`name` is the first key present, evals first)
            self._train(st, name, data[name])
            return None
        train = pick(data, self.falling)
        if train is not None:
            self._train(st, train[0], train[1])
        v = finite(data[name])
        if v is None or repeated(st, data, name, v):
            return None
        cur_train = st["train_sum"] / st["train_count"] if st["train_count"] else st["train_last"]
        if cur_train is None:
            return None
        pv, pt = st["val_value"], st["train_mean"]
        if pv is not None and pt is not None:
            st["in_a_row"] = st["in_a_row"] + 1 if (v > pv and cur_train < pt) else 0
        st["val_metric"], st["val_value_before"], st["val_value"], st["train_mean_before"], st["train_mean"] = (
            name,
            pv,
            v,
            pt,
            cur_train,
        )
        st["train_sum"], st["train_count"] = 0.0, 0
        given = gave_back(st, v)  # on every eval: it keeps the first and the best
        return st["in_a_row"] >= self.count and given >= self.min_giveback

    @staticmethod
    def _train(st: dict[str, Any], name: str, value: Any) -> None:
        tv = finite(value)
        if tv is not None:
            st["train_sum"] += tv
            st["train_count"] += 1
            st["train_last"] = tv
            st["train_metric"] = name

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        train = st.get("train_metric", self.falling[0])
        return (
            f"{st['val_metric']} rose to {fmt(st['val_value'])} (from {fmt(st['val_value_before'])}) "
            f"while {train} fell to {fmt(st['train_mean'])} (from {fmt(st['train_mean_before'])}), "
            f"{st['in_a_row']} evals in a row",
            {st["val_metric"]: st["val_value"], train: st["train_mean"]},
        )

    def params(self) -> dict[str, Any]:
        return {"rising": list(self.rising), "falling": list(self.falling), "count": self.count,
                "min_giveback": self.min_giveback}  # fmt: skip


def lookup(config: dict[str, Any], path: str) -> Any:
    """`baseline.val_loss` -> config['baseline']['val_loss'], or None."""
    node: Any = config
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


@dataclass(frozen=True, slots=True)
class Baseline(OneMetric):
    """An eval metric against the experiment's expected baseline: improving, flat or worse.

    The baseline is a number in the rule (`value:`) or a path into the launch config
    (`config_key: baseline.val_loss`, read from `run.launched`); without one the rule stays quiet.
    """

    kind: ClassVar[str] = "baseline"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    value: float | None = None
    config_key: str | None = None
    mode: str = "min"  # min: lower is better
    tolerance: float = 0.02  # relative band counted as flat
    fire_on: tuple[str, ...] = ("worse",)
    events: frozenset[str] = METRIC_EVENTS

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        base = self.value if self.value is not None else lookup(config, self.config_key or "")
        # the baseline (+ "metric", "value", "verdict": the name read, its value, the last eval's verdict)
        return {"baseline": finite(base)}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        b = st["baseline"]
        if b is None:
            return None
        found = (name, event.data[name])
        if (v := finite(found[1])) is None:
            return None
        better = (b - v) if self.mode == "min" else (v - b)
        band = self.tolerance * abs(b)
        st["metric"], st["value"] = found[0], v
        st["verdict"] = "improving" if better > band else ("worse" if better < -band else "flat")
        return st["verdict"] in self.fire_on

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return (
            f"{st['metric']}={fmt(st['value'])} is {st['verdict']} vs the expected baseline {fmt(st['baseline'])} "
            f"(tolerance {self.tolerance:.0%})",
            {st["metric"]: st["value"], "baseline": st["baseline"], "verdict": st["verdict"]},
        )

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "value": self.value, "config_key": self.config_key, "mode": self.mode,
                "tolerance": self.tolerance, "fire_on": list(self.fire_on)}  # fmt: skip


@dataclass(frozen=True, slots=True)
class LrSchedule(OneMetric):
    """The learning rate is non-finite, drops to zero after having been positive, or (with
    `schedule: decay`) rises again after the decay began (peak left by more than `tolerance`).

    A decay that ends at zero (Hugging Face's linear schedule at its last step) is no drop: zero counts
    only when the rate before it was still above a quarter of its peak. A position going back (a run
    resumed from an earlier checkpoint replays its schedule) starts the watch over."""

    kind: ClassVar[str] = "lr_schedule"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    schedule: str = "decay"  # decay | any
    tolerance: float = 0.01
    zero: bool = True
    events: frozenset[str] = METRIC_EVENTS

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the highest rate, the lowest since the decay began, the last positive rate, the last position
        return {"peak": None, "trough": None, "seen_positive": False, "last": None, "at": None}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        v = number(event.data[name])
        if v is None:
            return None
        step = event.data.get("step")
        if isinstance(step, int):
            if st.get("at") is not None and step < st["at"]:
                st.update(self.initial({}, None))  # resumed from an earlier checkpoint
            st["at"] = step
        if not math.isfinite(v):
            return self._firing(st, name, v, "non-finite")
        if v <= 0:
            last, peak = st.get("last"), st["peak"]
            abrupt = last is None or peak is None or last > peak / 4
            return self._firing(st, name, v, "zero") if self.zero and st["seen_positive"] and abrupt else False
        st["last"] = v
        if not st["seen_positive"]:
            st["seen_positive"] = True
        peak, trough = st["peak"], st["trough"]
        if trough is None:
            if peak is None or v > peak:
                st["peak"] = v
            elif v < peak * (1 - self.tolerance):
                st["trough"] = v
            return False
        if v < trough:
            st["trough"] = v
            return False
        if self.schedule == "decay" and v > trough * (1 + self.tolerance):
            return self._firing(st, name, v, "rising")
        return False

    @staticmethod
    def _firing(st: dict[str, Any], name: str | None, v: float, why: str) -> bool:
        st["metric"], st["value"], st["why"] = name, v, why  # kept only when firing: that is what `explain` reports
        return True

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        m, v = st["metric"], st["value"]
        if st.get("why") == "rising":
            return f"{m}={fmt(v)} rose above {fmt(st['trough'])} while the schedule decays", {m: v}
        if st.get("why") == "zero":
            return f"{m}={fmt(v)}: the learning rate dropped to zero", {m: v}
        return f"{m}={fmt(v)} (non-finite)", {m: v}

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "schedule": self.schedule, "tolerance": self.tolerance, "zero": self.zero}

"""Kinds for a run that cannot learn: stuck (a loss frozen, or at chance for a task size the run states, for a
share of its planned length), and zero_start (a loss and a gradient of exactly 0 from the first step).

`stuck` is a judgement (a slow start sits at chance for a while, then learns): the default policy asks a
person first (`confirm:`). Its patience is the run's own shape: a share of the planned length its log or
launch config states (core/plan.py), else a number of evals; a run that says neither is never judged stuck.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

from trainwarden.core.metrics import direction, is_validation, quantity
from trainwarden.events.envelope import Event
from trainwarden.policies.kinds.progress import _significant as significant
from trainwarden.policies.kinds.progress import warming
from trainwarden.policies.kinds.values import METRIC_EVENTS, OneMetric, repeated
from trainwarden.policies.names import finite, fmt

ACCURACY_BAND = 0.3  # an accuracy within 30% of 1/k (relative; evals are noisy) agrees with chance for k classes


def agreed_k(loss: float, accuracy: float | None) -> int | None:
    """The k of a k-way task at chance that a loss and an accuracy beside it agree on: the loss names ln k, and
    the accuracy (a percentage too) is near 1/k. Neither names k alone (any number is ln k, or 1/k, for some k)."""
    if accuracy is None or not 0.5 < loss < 14:
        return None
    a = accuracy / 100 if 1 < accuracy <= 100 else accuracy
    k = round(math.exp(loss))
    return k if k >= 2 and abs(a - 1 / k) <= ACCURACY_BAND / k else None


@lru_cache(maxsize=1024)
def _accuracies(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The accuracies among an event's keys: once per shape (a run has a few)."""
    return tuple(k for k in keys if quantity(k) == "accuracy")


@dataclass(frozen=True, slots=True)
class Stuck(OneMetric):
    """A loss that is not moving, held for `share` of the run's planned length (or, when the run does not say
    its length, for `evals` evals), over `count` values at least. Stuck is one of:

    - frozen: the very same value at every position: constant outputs. A value printed with fewer than `digits`
      significant digits (a Lightning bar's `val_loss=0.703`) may repeat by rounding: it counts only while it is
      still the metric's first value (a run that never moved, as with a learning rate of 0);
    - at a fixed `level` (R² of a constant prediction: 0, a regression stuck at the MSE of predicting the mean):
      every value within `spread` of it and their mean within `tolerance` (absolute);
    - at chance: every value within `spread` of ln k and their mean within `tolerance` of it, where k is stated,
      never guessed from the loss (any number is ln k for some k): the class count in the launch config or
      the log (`num_classes`, `Number of classes: 10`), or an accuracy beside the loss near 1/k (the two agree).

    The run's progress (its share done, its evals, its class count) comes from the engine (`planned`). The stretch
    starts over when a value leaves it; a value repeated at its own step (a redraw, a doubled line) is none, nor
    is an eval's value carried unchanged on the training lines of its epoch (`values.repeated`)."""

    kind: ClassVar[str] = "stuck"
    time_driven: ClassVar[bool] = False
    planned: ClassVar[bool] = True  # the engine puts the run's progress in st["progress"]
    names: tuple[str, ...]
    share: float = 0.1
    evals: int = 5
    count: int = 10
    digits: int = 4
    tolerance: float = 0.01
    spread: float = 0.05
    level: float | None = None  # a fixed level (absolute bands) instead of ln k (relative bands)
    chance: bool = True  # false: frozen (or at `level`) only, for a metric that is no loss (an accuracy)
    unless_rising: tuple[str, ...] = ()  # the learning rate: with no planned length, no stretch while it warms up
    events: frozenset[str] = METRIC_EVENTS

    @property
    def keys(self) -> tuple[str, ...]:
        return self.names + self.unless_rising  # the judged metric first: the index passes the first present

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the first value, the last one with its place [value, share, evals, step], and the stretch: [how ("frozen"
        # | "chance"), its value (frozen) or sum (chance), values, share, evals and step at its start, k at chance]
        # (+ "progress": the engine's, "acc": the last accuracy beside it, "metric", "to", "k": the name read, the
        # latest step, the task size at chance, "rep": `repeated`'s)
        return {"first": None, "last": None, "run": None}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        data = event.data
        if self.unless_rising:
            warming(st, event, self.unless_rising)
            if name not in self.names:  # a line without the judged metric: its learning rate only
                return None
        for key in _accuracies(tuple(data)):
            if (a := finite(data[key])) is not None:
                st["acc"] = a
        v = finite(data[name])
        step = data.get("step")
        last = st["last"]
        if v is None:
            return None
        if (
            repeated(st, data, name, v, trend=False)
            if is_validation(name)
            else last is not None and (v, step) == (last[0], last[3])
        ):
            return None  # a redraw or a doubled line; for an eval, also its value carried on training lines
        if st["first"] is None:
            st["first"] = v
        done, evals, stated = st.get("progress") or (None, 0, None)
        here = [done, evals, step]
        run = st["run"]
        level: float | None
        if self.level is not None or not self.chance:
            k, level, band, mean_band = None, self.level, self.spread, self.tolerance
        else:
            k = stated or (run[6] if run is not None and run[0] == "chance" else agreed_k(v, st.get("acc")))
            level = math.log(k) if k and k >= 2 else None
            band, mean_band = self.spread * (level or 0.0), self.tolerance * (level or 0.0)
        mode = direction(name) or "min"
        if st.get("top") is None or (v > st["top"] if mode == "max" else v < st["top"]):
            st["top"] = v  # the metric's best so far
        same = last is not None and v == last[0] and (significant(v) >= self.digits or v == st["first"])
        if same and v == st["top"] and v != st["first"]:
            same = False  # it improved to this value and holds it: saturated (31/32 of a small eval set), not stuck
        if st.get("warming") and done is None:  # the lr still warms up and the run states no length: a number
            run = None  # of evals would pass inside its warm-up (a slow start); a share of a stated length would not
        elif run is not None and run[0] == "frozen" and same:
            run[2] += 1
        elif run is not None and run[0] == "chance" and level is not None and abs(v - level) <= band:
            run[1] += v
            run[2] += 1
        elif level is not None and abs(v - level) <= band:
            run = ["chance", v, 1, *here, k]
        elif same:
            run = ["frozen", v, 2, *last[1:], None]
        else:
            run = None
        st["run"], st["last"], st["metric"], st["to"] = run, [v, *here], name, step
        if run is None or run[2] < self.count:
            return False
        if run[0] == "chance" and (level is None or abs(run[1] / run[2] - level) > mean_band):
            return False
        st["k"] = k if run[0] == "chance" else None
        if done is not None and run[3] is not None:
            return done - run[3] >= self.share
        return done is None and evals - run[4] >= self.evals

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        how, total, n, since, evals, first, _ = st["run"]
        done, evals_now = st["last"][1], st["last"][2]
        m = st["metric"]
        what = "evals" if is_validation(m) else "logged steps"
        where = f" (steps {first}-{st['to']})" if first is not None and st.get("to") is not None else ""
        if done is not None and since is not None:
            held = f"{done - since:.0%} of the run's planned length"
        else:
            held = f"{evals_now - evals} evals"
        if how == "frozen":
            values = {m: total, "repeats": n}
            return f"{m} has been {total:.6g} at {n} {what} in a row{where}, {held}: the model is not learning", values
        k, mean = st["k"], total / n
        if k is None:  # a fixed level: a regression's R² of a constant prediction
            level = f"{m} {mean:.4g} at {fmt(self.level)} over {n} {what}{where}, {held}"
            return f"{level}: no better than a constant prediction", {m: mean, "level": self.level}
        values = {m: mean, "k": k, "chance": math.log(k)}
        at = f"{m} {mean:.5g} = ln {k} over {n} {what}{where}, {held}"
        return f"{at}: predictions at chance for a {k}-way task", values

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "share": self.share, "evals": self.evals, "count": self.count,
                "digits": self.digits, "tolerance": self.tolerance, "spread": self.spread,
                "event": sorted(self.events), **({"level": self.level} if self.level is not None else {}),
                **({} if self.chance else {"chance": False}),
                **({"unless_rising": list(self.unless_rising)} if self.unless_rising else {})}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ZeroStart:
    """A loss of exactly 0 beside a gradient norm of exactly 0 on each of the first `count` logged steps: no
    gradient ever flows (every label masked, a precision bug), so no step changes the model. Not a judgement:
    a run whose loss or gradient was ever non-zero is never judged (a loss that reached 0 by learning)."""

    kind: ClassVar[str] = "zero_start"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    grads: tuple[str, ...]
    count: int = 5
    events: frozenset[str] = METRIC_EVENTS

    @property
    def keys(self) -> tuple[str, ...]:
        return self.names

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # logged steps at zero so far, whether a value was ever non-zero, the last step counted
        return {"zeros": 0, "moved": False, "at": None}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        if st["moved"]:
            return False
        loss = finite(event.data[name])
        grad = next((finite(event.data[g]) for g in self.grads if g in event.data), None)
        if loss is None or (grad is None and loss == 0.0):
            return None  # a loss of 0 printed alone may be rounding: the gradient says whether anything flows
        if loss != 0.0 or grad != 0.0:
            st["moved"] = True
            return False
        step = event.data.get("step")
        if step is None or step != st["at"]:
            st["zeros"] += 1
        st["at"], st["metric"] = step, name
        return st["zeros"] >= self.count

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return (
            f"{st['metric']} and the gradient norm have been exactly 0 from the first logged step ({st['zeros']} "
            "logged steps): no gradient flows (all labels masked? a precision bug?)",
            {st["metric"]: 0.0, "grad_norm": 0.0, "steps": st["zeros"]},
        )

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "grads": list(self.grads), "count": self.count,
                "event": sorted(self.events)}  # fmt: skip

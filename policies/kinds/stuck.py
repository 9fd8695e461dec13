"""Kinds for a run that cannot learn: stuck (a loss frozen, or at chance for a task size the run states, for a
share of its planned length), and zero_start (a loss and a gradient of exactly 0 from the first step).

`stuck` is a judgement (a slow start sits at chance for a while, then learns): the default policy asks a
person first (`confirm:`). Its patience is the run's own shape: a share of the planned length its log or
launch config states (core/plan.py), else a number of evals; a run that says neither is never judged stuck.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from trainwarden.core import plan
from trainwarden.core.metrics import is_validation, quantity
from trainwarden.events.envelope import Event
from trainwarden.policies.kinds.progress import _significant as significant
from trainwarden.policies.kinds.values import METRIC_EVENTS, repeated
from trainwarden.policies.names import finite

ACCURACY_BAND = 0.1  # an accuracy within 10% of 1/k (relative) is at chance for k classes


def chance_k(accuracy: float) -> int | None:
    """The k of a k-way task at whose chance level (1/k) `accuracy` sits (a percentage too), or None."""
    a = accuracy / 100 if 1 < accuracy <= 100 else accuracy
    if not 0 < a <= 0.5:
        return None
    k = round(1 / a)
    return k if abs(a - 1 / k) <= ACCURACY_BAND / k else None


@dataclass(frozen=True, slots=True)
class Stuck:
    """A loss that is not moving, held for `share` of the run's planned length (or, when the run does not say
    its length, for `evals` evals), over `count` values at least. Stuck is one of:

    - frozen: the very same value at every position: constant outputs. A value printed with fewer than `digits`
      significant digits (a Lightning bar's `val_loss=0.703`) may repeat by rounding: it counts only while it is
      still the metric's first value (a run that never moved, as with a learning rate of 0);
    - at chance: every value within `spread` of ln k and their mean within `tolerance` of it, where k is stated,
      never guessed from the loss (any number is ln k for some k): the class count in the launch config or
      the log (`num_classes`, `Number of classes: 10`), or an accuracy in the same run at 1/k.

    The stretch starts over when a value leaves it; a value repeated at its own step (a redraw, a doubled line) is
    none, nor is an eval's value carried unchanged on the training lines of its epoch (`values.repeated`)."""

    kind: ClassVar[str] = "stuck"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    share: float = 0.1
    evals: int = 5
    count: int = 10
    digits: int = 4
    tolerance: float = 0.01
    spread: float = 0.05
    events: frozenset[str] = METRIC_EVENTS
    keys: None = None  # every metric event: the plan, the class count and the evals come on events of their own

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the run's plan (core/plan.py), evals seen, the k an accuracy says, the first value, the last one with its
        # place [value, share, evals, step], and the stretch: [how ("frozen" | "chance"), its value (frozen) or sum
        # (chance), values, share, evals and step at its start] (+ "metric", "to", "k": the name read, the latest
        # step, the task size at chance, "rep": `repeated`'s)
        return {"plan": plan.from_config(config), "evals": 0, "acc_k": None, "first": None, "last": None, "run": None}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        data = event.data
        plan.fold(st["plan"], data)
        evals = any(is_validation(k) for k in data)
        for key, value in data.items():
            if quantity(key) == "accuracy" and (a := finite(value)) is not None:
                st["acc_k"] = chance_k(a)
        found = next((n for n in self.names if n in data), None)
        v = finite(data[found]) if found is not None else None
        if evals:
            st["evals"] += 1
        step = data.get("step")
        last = st["last"]
        if found is None or v is None:
            return None
        if (
            repeated(st, data, found, v, trend=False)
            if is_validation(found)
            else last is not None and (v, step) == (last[0], last[3])
        ):
            return None  # a redraw or a doubled line; for an eval, also its value carried on training lines
        if st["first"] is None:
            st["first"] = v
        done = plan.share(st["plan"], step)
        here = [done, st["evals"], step]
        k = st["plan"].get(plan.NUM_CLASSES) or st["acc_k"]
        level = math.log(k) if k and k >= 2 else None
        run = st["run"]
        same = last is not None and v == last[0] and (significant(v) >= self.digits or v == st["first"])
        if run is not None and run[0] == "frozen" and same:
            run[2] += 1
        elif run is not None and run[0] == "chance" and level is not None and abs(v - level) <= self.spread * level:
            run[1] += v
            run[2] += 1
        elif level is not None and abs(v - level) <= self.spread * level:
            run = ["chance", v, 1, *here]
        elif same:
            run = ["frozen", v, 2, *last[1:]]
        else:
            run = None
        st["run"], st["last"], st["metric"], st["to"] = run, [v, *here], found, step
        if run is None or run[2] < self.count:
            return False
        if run[0] == "chance" and (level is None or abs(run[1] / run[2] - level) > self.tolerance * level):
            return False
        st["k"] = k if run[0] == "chance" else None
        if done is not None and run[3] is not None:
            return done - run[3] >= self.share
        return done is None and st["evals"] - run[4] >= self.evals

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        how, total, n, since, evals, first = st["run"]
        m = st["metric"]
        what = "evals" if is_validation(m) else "logged steps"
        where = f" (steps {first}-{st['to']})" if first is not None and st.get("to") is not None else ""
        done = plan.share(st["plan"], st.get("to"))
        held = (
            f"{done - since:.0%} of the run's planned length"
            if done is not None and since is not None
            else f"{st['evals'] - evals} evals"
        )
        if how == "frozen":
            values = {m: total, "repeats": n}
            return f"{m} has been {total:.6g} at {n} {what} in a row{where}, {held}: the model is not learning", values
        k, mean = st["k"], total / n
        values = {m: mean, "k": k, "chance": math.log(k)}
        at = f"{m} {mean:.5g} = ln {k} over {n} {what}{where}, {held}"
        return f"{at}: predictions at chance for a {k}-way task", values

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "share": self.share, "evals": self.evals, "count": self.count,
                "digits": self.digits, "tolerance": self.tolerance, "spread": self.spread,
                "event": sorted(self.events)}  # fmt: skip


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

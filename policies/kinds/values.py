"""Kinds that judge one metric's values: nonfinite, threshold, spike, trend, plateau.

Each keeps a bounded window at most (never the run's history), so a sample costs the same at
step 100 and at step 10,000,000, and the state fits in the worker checkpoint as JSON.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from trainwarden.core.metrics import BY_NAME, canonical, is_validation, quantity, role
from trainwarden.core.plan import PLAN_KEYS
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.policies.names import finite, fmt, number, pick

METRIC_EVENTS = frozenset({t.METRIC})
# where a sample is, and what the run planned (core/plan.py), not what it measures
POSITIONS = frozenset({"step", "epoch", "optimizer_step"}) | PLAN_KEYS
# the largest finite value of a float type a model computes in: beyond it the value is Inf there
OVERFLOWS = {"float32": 3.4028234663852886e38}  # (2 - 2**-23) * 2**127 = exp(88.72)


def repeated(st: dict[str, Any], data: Any, name: str, v: float, *, trend: bool = True) -> bool:
    """Whether value `v` of `name` repeats the last one at the same position: a bar redrawn with the last
    eval in its postfix, a doubled line, a resumed run printing an eval again. Not a new sample.

    The position is the step, and for an eval metric also the epoch. A new value is always news. For the
    kinds that judge an eval's `trend` (rising, stalled, past its best, at chance), an eval value equal to
    the last one and carried beside a training value is no new eval at any position: a training loop that
    prints the last `val_loss` on every step's line. An eval printed on its own (an eval line, the values
    the agent read after an eval bar ran: `agent.bars.fresh`) is an eval even when it scored the same to
    every printed digit (a Lightning bar's `val_loss=0.753` at 3 digits, eval after eval). The `frozen` kind
    counts positions instead (`trend=False`): a carried eval repeats there only within its epoch."""
    step = data.get("step")
    evals = is_validation(name)
    epoch = data.get("epoch") if evals else None
    last = st.get("rep")
    st["rep"] = [v, step, epoch]
    if last is None or last[0] != v:
        return False
    same_epoch = epoch is not None and epoch == last[2]
    carried = evals and has_training_value(data)
    same_step = step is not None and step == last[1]
    return same_step or (carried and (trend or same_epoch)) or (same_epoch and step is None)


def has_training_value(data: Any) -> bool:
    """Whether an event holds a training value besides its position: a training step's line (its eval values,
    if any, were carried on it)."""
    return any(k not in POSITIONS and role(k) == "train" for k in data)


class OneMetric:
    """What kinds reading one metric (under any of its names) share: the index looks them up by name."""

    __slots__ = ()
    names: tuple[str, ...]

    @property
    def keys(self) -> tuple[str, ...]:
        return self.names

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, slots=True)
class NonFinite(OneMetric):
    """NaN or +/-Inf: the run is broken and nothing will recover it.

    With `skipped_by` (the loss), a non-finite value beside a finite, non-zero loss in the same event
    is a step that dynamic loss scaling skipped (fp16 overflow): normal when isolated, so it fires only
    after `skips` such events in a row. Beside a loss of exactly 0, a non-finite one, or none, it fires
    at once: the forward pass itself is broken. `beside` keeps one of the two: `broken` fires only beside
    such a loss (a STOP rule: a run of skipped steps beside a finite loss is dynamic loss scaling at work,
    averaged log lines carry a NaN whenever one step of the interval was skipped), `skipped` only on
    `skips` skipped steps in a row (a warning rule), `any` on both.

    With `overflow: float32`, a finite value beyond float32's range (`OVERFLOWS`) counts as an Inf: a model
    computes in float32 (or narrower), where such a value is Inf; printed finite, it was computed in float64 or
    clamped (OpenNMT prints `exp(min(loss, 100))`, 2.7e43). A perplexity there is exp of a cross-entropy above
    88.7 nats: the true token's probability under 1e-38, a diverged run whatever the vocabulary.
    """

    kind: ClassVar[str] = "nonfinite"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    events: frozenset[str] = METRIC_EVENTS
    skipped_by: tuple[str, ...] = ()
    skips: int = 3
    beside: str = "any"  # any | broken | skipped
    overflow: str | None = None  # a key of OVERFLOWS: a finite value beyond that type's range counts as Inf

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        v = number(event.data[name])
        if v is None:
            return None
        if math.isfinite(v) and (self.overflow is None or abs(v) <= OVERFLOWS[self.overflow]):
            if self.skipped_by and st.get("skipped"):
                st["skipped"] = 0
            return False
        st["metric"], st["value"] = name, v  # kept only when firing: that is what `explain` reports
        if not self.skipped_by:
            return True
        found = pick(event.data, self.skipped_by)
        loss = finite(found[1]) if found is not None else None
        st["beside"] = None if found is None else [found[0], found[1]]
        if not loss:  # no loss, a non-finite one, or exactly 0: not a skipped step
            st["skipped"] = 0
            return self.beside != "skipped"
        st["skipped"] = st.get("skipped", 0) + 1
        return self.beside != "broken" and st["skipped"] >= self.skips

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        reason, values = f"{st['metric']}={fmt(st['value'])}", {st["metric"]: st["value"]}
        if self.overflow is not None and math.isfinite(st["value"]):
            bound = OVERFLOWS[self.overflow]
            reason += f", beyond {self.overflow}'s range ({fmt(bound)} = exp({math.log(bound):.1f})): an overflow"
        if not self.skipped_by:
            return reason, values
        beside = st.get("beside")
        if beside is None:
            return f"{reason} with no {self.skipped_by[0]} in the same step", values
        values[beside[0]] = beside[1]
        if st.get("skipped"):
            in_a_row = f"on {st['skipped']} logged steps in a row beside a finite {beside[0]} ({fmt(beside[1])})"
            return f"{reason} {in_a_row}: the fp16 loss scaler keeps skipping steps", values
        return f"{reason} with {beside[0]}={fmt(beside[1])}: the forward pass is broken", values

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metric": list(self.names), "event": sorted(self.events)}
        if self.skipped_by:
            out |= {"skipped_by": list(self.skipped_by), "skips": self.skips}
            if self.beside != "any":
                out["beside"] = self.beside
        if self.overflow is not None:
            out["overflow"] = self.overflow
        return out


@dataclass(frozen=True, slots=True)
class NonFiniteTerm:
    """NaN or +/-Inf in any training metric that measures `quantity` (`events.metrics.quantity`): a loss term
    under a trainer's own name (`loss_net`, `generator_loss`, `train/embed_loss`, `loss_disc`) that no rule
    names, where the trainer prints no plain `loss`. The vocabulary's own names (`loss`, `grad_norm`) are left to
    the rules that name them."""

    kind: ClassVar[str] = "nonfinite_term"
    time_driven: ClassVar[bool] = False
    quantity: str = "loss"
    events: frozenset[str] = METRIC_EVENTS
    keys: None = None

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        return {}  # (+ "metric", "value": the term that was not finite, when firing)

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        seen = False
        for key, value in event.data.items():
            if key in POSITIONS or canonical(key) in BY_NAME or quantity(key) != self.quantity or role(key) != "train":
                continue
            v = number(value)
            if v is None:
                continue
            if not math.isfinite(v):
                st["metric"], st["value"] = key, v
                return True
            seen = True
        return False if seen else None

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return f"{st['metric']}={fmt(st['value'])}", {st["metric"]: st["value"]}

    def params(self) -> dict[str, Any]:
        return {"quantity": self.quantity, "event": sorted(self.events)}


@dataclass(frozen=True, slots=True)
class Threshold(OneMetric):
    """A finite value above `above` or below `below` (NaN is the nonfinite kind's business)."""

    kind: ClassVar[str] = "threshold"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    above: float | None = None
    below: float | None = None
    events: frozenset[str] = METRIC_EVENTS

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        raw = event.data[name]
        v = finite(raw)
        if v is None:
            return None if number(raw) is None else False
        if (self.above is not None and v > self.above) or (self.below is not None and v < self.below):
            st["metric"], st["value"] = name, v  # kept only when firing: that is what `explain` reports
            return True
        return False

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        v = st["value"]
        limit = f"> {fmt(self.above)}" if self.above is not None and v > self.above else f"< {fmt(self.below)}"
        return f"{st['metric']}={fmt(v)} {limit}", {st["metric"]: v}

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "above": self.above, "below": self.below, "event": sorted(self.events)}


@dataclass(frozen=True, slots=True)
class Spike(OneMetric):
    """A value `ratio` times above (or below, `direction: down`) its trailing mean or median.

    Values that fire are kept out of the trailing window, so a spike that persists keeps firing
    instead of becoming its own baseline; a spike that recovers simply stops firing. With `above`, a
    value over that absolute ceiling fires too, history or not (grad norm: 10x its mean, or over 100).
    """

    kind: ClassVar[str] = "spike"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    ratio: float = 2.0
    window: int = 20
    stat: str = "mean"  # mean | median
    direction: str = "up"  # up | down
    min_samples: int = 5
    events: frozenset[str] = METRIC_EVENTS
    above: float | None = None

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the window in arrival order, sorted (for the median) and its sum (for the mean); when firing also
        # "metric", "value", "baseline": the name read, its value and the trailing statistic it was compared with
        return {"window": [], "sorted_window": [], "window_sum": 0.0}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        v = event.data[name]
        if type(v) is not float or not math.isfinite(v):  # the hot path: inlined `finite`
            v = finite(v)
            if v is None:
                return None
        if self.above is not None and v > self.above:
            st["metric"], st["value"], st["baseline"] = name, v, None
            return True
        window: list[float] = st["window"]
        n = len(window)
        if self.stat == "median":
            ordered: list[float] = st["sorted_window"]
            if n >= self.min_samples:
                mid = n // 2
                base = ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2
                if base > 0 and (v > self.ratio * base if self.direction == "up" else v * self.ratio < base):
                    st["metric"], st["value"], st["baseline"] = name, v, base
                    return True
            window.append(v)
            bisect.insort(ordered, v)
            if n >= self.window:
                del ordered[bisect.bisect_left(ordered, window.pop(0))]
            return False
        total: float = st["window_sum"]
        if n >= self.min_samples:
            base = total / n
            if base > 0 and (v > self.ratio * base if self.direction == "up" else v * self.ratio < base):
                st["metric"], st["value"], st["baseline"] = name, v, base
                return True
        window.append(v)
        total += v
        if n >= self.window:
            total -= window.pop(0)
        st["window_sum"] = total
        return False

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        v, b = st["value"], st["baseline"]
        if b is None:
            return f"{st['metric']}={fmt(v)} > {fmt(self.above)}", {st["metric"]: v}
        times = v / b if b else math.inf
        if self.direction == "up":
            why = f"{fmt(times)}x its trailing {self.stat} {fmt(b)}"
        else:
            why = f"below 1/{fmt(self.ratio)} of its trailing {self.stat} {fmt(b)}"
        return f"{st['metric']}={fmt(v)} is {why}", {st["metric"]: v, f"trailing_{self.stat}": b}

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "ratio": self.ratio, "window": self.window, "stat": self.stat,
                "direction": self.direction, "min_samples": self.min_samples, "event": sorted(self.events),
                **({"above": self.above} if self.above is not None else {})}  # fmt: skip


def gave_back(st: dict[str, Any], v: float) -> float:
    """How much of its improvement since its first value (lower is better) `v` has given back, 0..; all of it
    (inf) when it never improved. Keeps the first and the best in `st`."""
    first = st["first"] = v if st.get("first") is None else st["first"]
    best = st["best"] = v if st.get("best") is None else min(st["best"], v)
    return (v - best) / (first - best) if first > best else math.inf


@dataclass(frozen=True, slots=True)
class Trend(OneMetric):
    """Rising (or falling) `count` evaluations in a row, each by more than `min_delta` (relative), and by now
    giving back at least `min_giveback` of the improvement made since the first value: a gradient-boosting
    round is an eval, and a val loss that fell 0.49 -> 0.044 wobbles up three rounds in a row by chance; a
    run that never improved gives back everything at its first rise."""

    kind: ClassVar[str] = "trend"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    direction: str = "rising"  # rising | falling
    count: int = 3
    min_delta: float = 0.0
    min_giveback: float = 0.0
    events: frozenset[str] = METRIC_EVENTS

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the last count+1 values; evaluations in a row it moved; the first value and the best since
        # (+ "metric": the name read)
        return {"history": [], "in_a_row": 0, "first": None, "best": None}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        found = (name, event.data[name])
        v = finite(found[1])
        if v is None or repeated(st, event.data, name, v):
            return None
        history: list[float] = st["history"]
        if history:
            prev = history[-1]
            delta = (v - prev) if self.direction == "rising" else (prev - v)
            st["in_a_row"] = st["in_a_row"] + 1 if delta > self.min_delta * abs(prev) else 0
        history.append(v)
        if len(history) > self.count + 1:
            del history[0]
        st["metric"] = found[0]
        sign = 1.0 if self.direction == "rising" else -1.0
        given = gave_back(st, sign * v)  # on every eval: it keeps the first and the best
        return st["in_a_row"] >= self.count and given >= self.min_giveback

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        verb = "rose" if self.direction == "rising" else "fell"
        path = " -> ".join(fmt(x) for x in st["history"])
        return f"{st['metric']} {verb} {st['in_a_row']} evals in a row ({path})", {st["metric"]: st["history"][-1]}

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "direction": self.direction, "count": self.count,
                "min_delta": self.min_delta, "min_giveback": self.min_giveback,
                "event": sorted(self.events)}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Plateau(OneMetric):
    """Relative improvement below `eps` between the older and the newer half of the last `window` values."""

    kind: ClassVar[str] = "plateau"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    window: int = 20
    eps: float = 0.01
    mode: str = "min"  # min: lower is better (loss); max: higher is better (accuracy)
    events: frozenset[str] = METRIC_EVENTS

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the last `window` values (+ "metric": the name read, "gain": the relative gain last computed)
        return {"window": []}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        found = (name, event.data[name])
        v = finite(found[1])
        if v is None or repeated(st, event.data, name, v):
            return None
        window: list[float] = st["window"]
        window.append(v)
        if len(window) > self.window:
            del window[0]
        st["metric"] = found[0]
        if len(window) < self.window:
            return False
        half = self.window // 2
        older = sum(window[:half]) / half
        newer = sum(window[-half:]) / half
        if older == 0:
            return False
        gain = (older - newer) if self.mode == "min" else (newer - older)
        st["gain"] = gain / abs(older)
        return st["gain"] < self.eps

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return (
            f"{st['metric']} improved {st['gain']:.2%} over the last {self.window} values (< {self.eps:.2%})",
            {st["metric"]: st["window"][-1], "improvement": st["gain"]},
        )

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "window": self.window, "eps": self.eps, "mode": self.mode,
                "event": sorted(self.events)}  # fmt: skip

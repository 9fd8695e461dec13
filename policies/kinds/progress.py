"""Kinds that judge a metric against the run's own best or first values: runaway, no_progress, frozen.

Each keeps a few numbers (and `runaway` a window of `smooth` values), never the run's history, so a
sample costs the same at step 100 and at step 10,000,000.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise
from math import isfinite
from typing import Any, ClassVar

from trainwarden.core.metrics import is_validation
from trainwarden.events.envelope import Event
from trainwarden.policies.kinds.values import METRIC_EVENTS, OneMetric, repeated
from trainwarden.policies.names import finite, fmt

# How many values a noisy metric's median needs per unit of its relative spread squared: the median of n values
# strays by about 1.25 spread / sqrt(n), and its lowest over a run (about 3 of those) should stay within a quarter
# of the level, (3 x 1.25 / 0.25)^2 = 225 (a spread of 0.1: the 3 of `smooth`; 0.3: 21 values).
NOISE_K = 225.0
NOISE_EVERY = 16  # once its band is full, a metric's noise is measured every 16 values (the cost per value stays low)


def _median(window: list[float]) -> float:
    """The median of a short window; the usual three values without sorting (no list built)."""
    n = len(window)
    if n == 3:
        a, b, c = window
        return max(min(a, b), min(max(a, b), c))
    if n == 1:
        return window[0]
    ordered = sorted(window)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclass(frozen=True, slots=True)
class Runaway(OneMetric):
    """A loss that rose far above the best it reached: its median over the last `smooth` values is
    more than `ratio` times its best, and so is the latest value (a loss coming back down does not
    fire), judged from the `warmup`-th value.

    The best is the lowest level the loss held: the lower of two consecutive medians, at its lowest
    (so one lucky batch, or one of two interleaved series, does not set it), and a blow-up cannot
    raise it, so a run that explodes early is caught too (a trailing mean takes the blow-up in).
    A loss that went negative (a negative log-likelihood) fires when its magnitude fell under
    1/`ratio` of its best's (-5.6 -> above -2.8 for 2x). Rises smaller than `floor` x the first
    median count as noise: a loss that fell 100-fold jitters far above 2x its best from batch to batch,
    and has run away only once it gave back a good part of what it learned.

    `hold`: for a noisy per-batch loss (a band from 0.4 to 2.1 around 1.0), a three-batch dip is no level the
    run held. The window of both medians then grows from `smooth` to as many values as the run's own noise
    needs (its relative spread, from the median step between consecutive values, squared, times `NOISE_K`; at
    most `hold`), so the best is a level the run held and the judged level is the band's, not a dip's nor a
    bump's. Values above the limit are kept out of the noise measure (a blow-up is no noise). A clean loss
    keeps the `smooth` window.

    `start_ratio`: also fire when the median (and the latest value) is that many times the very first
    value. A run's first logged loss is its initial loss, the highest a healthy run shows; a loss that
    leaps from it and thrashes (0.78 -> 30, 15, 80, 1.4, 38: a learning rate far too high under clipping)
    never holds a low level for the best to be set.
    """

    kind: ClassVar[str] = "runaway"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    ratio: float = 2.0
    warmup: int = 3
    smooth: int = 3
    floor: float = 0.25
    start_ratio: float | None = None
    hold: int = 0  # the widest window a noisy metric's medians take (0: `smooth`, whatever the noise)
    events: frozenset[str] = METRIC_EVENTS

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the last `smooth` (with `hold`: `hold`) values, values seen (up to `warmup`), the first and the previous
        # median, the best level so far and the median limit it sets, the first value's limit under `start_ratio`
        # (+ "metric", "median", "over": the name read, the median judged and what it rose over, when firing;
        # with `hold`, "band": the last `hold` values under the limit, that measure the noise)
        return {"recent": [], "seen": 0, "first": None, "prev": None, "best": None, "limit": None, "start": None}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        v = event.data[name]
        if type(v) is not float or not isfinite(v):  # the hot path: inlined `finite`
            v = finite(v)
            if v is None:
                return None
        recent: list[float] = st["recent"]
        if not recent and st["start"] is None and self.start_ratio is not None and v > 0:
            st["start"] = v * self.start_ratio
        recent.append(v)
        n = len(recent)
        if n > max(self.smooth, self.hold):
            del recent[0]
            n -= 1
        seen = st["seen"]
        if seen < self.warmup:  # counted only while warming up: no write per value afterwards
            st["seen"] = seen = seen + 1
        if n < self.smooth:
            return False
        if self.hold > self.smooth:
            width = self._width(st, v)
            if width > self.smooth:  # a noisy metric: the median of a window its noise needs
                return self._judge(st, name, v, _median(recent[-width:]), recent[-width:])
            recent = recent[-self.smooth :]
            n = len(recent)
        if n == 3:  # the usual window: its median by comparisons
            a, b, c = recent
            if a > b:
                a, b = b, a
            med = b if c >= b else (c if c > a else a)
        else:
            med = _median(recent)
        return self._judge(st, name, v, med, recent)

    def _width(self, st: dict[str, Any], v: float) -> int:
        """How many values the medians take: `smooth`, or more for a metric whose batches are noisy (its relative
        spread is the median step between consecutive values under the limit, over their median)."""
        band: list[float] = st.setdefault("band", [])
        limit = st["limit"]
        if limit is None or v <= limit:
            band.append(v)
            if len(band) > self.hold:
                del band[0]
        tick = st["tick"] = st.get("tick", 0) + 1
        if len(band) < 4:
            return self.smooth
        if tick % NOISE_EVERY and len(band) >= self.hold:  # a full band's noise moves slowly: measured every few
            return int(st["noisy"])
        level = abs(_median(band))
        width = self.smooth
        if level:
            steps = _median([abs(b - a) for a, b in pairwise(band)])
            width = max(self.smooth, min(math.ceil(NOISE_K * (steps / level) ** 2) | 1, self.hold, len(band)))
        st["noisy"] = width  # odd: a median is one of the values
        return width

    def _judge(self, st: dict[str, Any], name: str, v: float, med: float, window: list[float]) -> bool:
        """The median `med` of the last values (`window`) against the run's best level and its first value."""
        st["width"] = len(window)
        seen = st["seen"]
        prev = st["prev"]
        st["prev"] = med
        held = med if prev is None or prev < med else prev  # a level counts once two medians in a row reach it
        best = st["best"]
        start = st["start"]
        if start is not None and seen >= self.warmup and med > start and v > start:
            st["metric"], st["median"], st["over"] = name, med, "start"
            return True
        if best is None or held < best:  # a new best: the median is at it, nothing to judge
            if best is None:
                st["first"] = med
            st["best"] = held
            st["limit"] = self._limit(held, st["first"])
            return False
        limit = st["limit"]
        if seen < self.warmup or limit is None:
            return False
        if med > limit and v > limit:  # the level, and the latest value too: not already coming back
            st["metric"], st["median"], st["over"] = name, med, "best"  # kept only when firing (`explain`)
            return True
        return False

    def _limit(self, best: float, first: float) -> float | None:
        """The median above which the loss ran away from `best`; None for a best of exactly 0."""
        if best > 0:
            return best + (self.ratio - 1) * max(best, self.floor * abs(first))
        return best / self.ratio if best < 0 else None  # a negative best: nearer zero than best / ratio

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        med, best, what = st["median"], st["best"], f"{st['metric']}={fmt(st['median'])}"
        what += f" (median of the last {st.get('width', len(st['recent']))})"
        if st.get("over") == "start":
            first = st["start"] / (self.start_ratio or 1.0)
            return f"{what} is {fmt(med / first)}x its first value {fmt(first)}", {st["metric"]: med, "first": first}
        over = f"{fmt(med / best)}x" if best > 0 else f"{fmt(med - best)} above (a negative loss)"
        return f"{what} is {over} its best {fmt(best)}", {st["metric"]: med, "best": best}

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "ratio": self.ratio, "warmup": self.warmup, "smooth": self.smooth,
                "floor": self.floor, "start_ratio": self.start_ratio, "event": sorted(self.events),
                **({"hold": self.hold} if self.hold else {})}  # fmt: skip


@dataclass(frozen=True, slots=True)
class NoProgress(OneMetric):
    """After `evals` evaluations, the best value since the first `first` ones is no better than those by
    more than `min_delta` (relative): a run stuck where it started (at chance, say).

    `mode: min` for losses and error rates, `max` for accuracy-like metrics. `descent`: a run that starts
    climbing is not stuck: while its last `descent` evals each improved on the one before (a slow start, its
    learning rate still warming up: 1.4299 -> 1.4298 -> 1.4296 -> 1.4295, then 0.69 a few evals later), it does
    not fire, however small the gain so far; a flat one (1.38630, 1.38628, 1.38619, 1.38560, 1.38620 at ln 4)
    improves that often in a row by chance only now and then.
    """

    kind: ClassVar[str] = "no_progress"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    evals: int = 5
    first: int = 1
    min_delta: float = 0.01
    mode: str = "min"  # min: lower is better (loss); max: higher is better (accuracy)
    descent: int = 0
    unless_rising: tuple[str, ...] = ()  # the learning rate: not stuck while it still warms up (a slow start)
    events: frozenset[str] = METRIC_EVENTS

    @property
    def keys(self) -> tuple[str, ...]:
        return self.names + self.unless_rising  # the judged metric first: the index passes the first present

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # evaluations seen, the best of the first `first` ("base") and of the later ones (+ "metric": its name;
        # with `descent`, "prev" and "better": the last value and how many evals in a row improved on the one before;
        # with `unless_rising`, "peak" and "warming": `warming`'s)
        return {"seen": 0, "base": None, "best": None}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        if self.unless_rising:
            warming(st, event, self.unless_rising)
            if name not in self.names:  # a line without the judged metric: its learning rate only
                return None
        v = finite(event.data[name])
        if v is None or repeated(st, event.data, name, v):
            return None
        st["seen"] += 1
        if self.descent:
            prev = st.get("prev")
            improved = prev is not None and (v < prev if self.mode == "min" else v > prev)
            st["prev"], st["better"] = v, (st.get("better", 0) + 1) if improved else 0
        key = "base" if st["seen"] <= self.first else "best"
        old = st[key]
        if old is None or (v < old if self.mode == "min" else v > old):
            st[key] = v
        if st["seen"] < self.evals or st["best"] is None:
            return False
        base, best = st["base"], st["best"]
        gain = (base - best) if self.mode == "min" else (best - base)
        st["metric"] = name
        climbing = self.descent > 0 and st["better"] >= self.descent  # it started learning: not stuck
        return gain <= self.min_delta * abs(base) and not climbing and not st.get("warming")

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        first = "its first value" if self.first == 1 else f"its first {self.first} values"
        return (
            f"{st['metric']} is no better than {first} ({fmt(st['base'])}) after {st['seen']} values "
            f"(best since: {fmt(st['best'])})",
            {st["metric"]: st["best"], "first": st["base"], "evals": st["seen"]},
        )

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "evals": self.evals, "first": self.first, "min_delta": self.min_delta,
                "mode": self.mode, "event": sorted(self.events),
                **({"descent": self.descent} if self.descent else {}),
                **({"unless_rising": list(self.unless_rising)} if self.unless_rising else {})}  # fmt: skip


def warming(st: dict[str, Any], event: Event, keys: tuple[str, ...]) -> None:
    """Notes in `st` whether the learning rate on this event (the first of `keys` it has, if any) is above every
    earlier one: a warm-up, during which a slow start is no stuck or frozen run."""
    for key in keys:
        lr = finite(event.data.get(key))
        if lr is not None:
            peak = st.get("peak")
            st["warming"] = peak is not None and lr > peak
            st["peak"] = lr if peak is None else max(peak, lr)
            return


@dataclass(frozen=True, slots=True)
class Frozen(OneMetric):
    """The very same value at `count` positions in a row: an output that no longer depends on the weights
    (a dead or saturated network, an eval loss that stopped moving, a training loss that is not learning).
    A held-out loss never repeats to the printed digit while the model learns, nor does a training loss
    over many steps. A value repeated at its own position (a bar redraw, a doubled line, a resumed run's
    eval printed again: see `repeated`) is no new position. A value with fewer than `digits` significant
    digits (fairseq's `valid loss 1.94`, a loss of 0.0) may repeat by rounding alone, and never counts. A repeat
    on a line where `unless_falling` (the training loss) fell is chance: the model still learns (a boosting
    round's eval loss, printed to 5 decimals, moves by 1e-4). A repeat while `unless_rising` (the learning rate, on
    any line) is still rising is a slow start, not a dead network: a warm-up from 1e-6 moves the weights too
    little to change an eval loss's 4th digit for a few evals (1.4299 at 3 evals in a row, then 0.69)."""

    kind: ClassVar[str] = "frozen"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    count: int = 3
    digits: int = 4
    unless_falling: str | None = None
    unless_rising: tuple[str, ...] = ()
    events: frozenset[str] = METRIC_EVENTS

    @property
    def keys(self) -> tuple[str, ...]:
        return self.names + self.unless_rising  # the judged metric first: the index passes the first present

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the last value, at how many positions in a row it came and the step of the first (+ "metric": its
        # name, "to": the step of the latest, "rep": what `repeated` compares with; with `unless_rising`, "peak"
        # and "warming": the highest learning rate seen and whether the latest was above all before it)
        return {"last": None, "same": 0, "from": None}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        if self.unless_rising:
            warming(st, event, self.unless_rising)
            if name not in self.names:  # a line without the judged metric: its learning rate only
                return None
        v = finite(event.data[name])
        if v is None or repeated(st, event.data, name, v, trend=False):
            return None
        step = event.data.get("step")
        learning = self._fell(st, event) or bool(st.get("warming"))
        if v == st["last"] and _significant(v) >= self.digits and not learning:
            st["same"] += 1
        else:
            st["same"], st["from"] = 1, step
        st["last"], st["metric"], st["to"] = v, name, step
        return st["same"] >= self.count

    def _fell(self, st: dict[str, Any], event: Event) -> bool:
        """Whether `unless_falling`, on this event, is below its value on the last one that had it."""
        if self.unless_falling is None:
            return False
        now = finite(event.data.get(self.unless_falling))
        if now is None:
            return False
        before, st["beside"] = st.get("beside"), now
        return before is not None and now < before

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        m, v, n = st["metric"], st["last"], st["same"]
        evals = is_validation(m)
        where = f" (steps {st['from']}-{st['to']})" if st.get("from") is not None and st.get("to") is not None else ""
        what = "evals" if evals else "logged steps"
        why = "the outputs no longer depend on the weights" if evals else "the model is not learning"
        return f"{m} has been {v:.6g} at {n} {what} in a row{where}: {why}", {m: v, "repeats": n}

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "count": self.count, "digits": self.digits,
                "unless_falling": self.unless_falling, "event": sorted(self.events),
                **({"unless_rising": list(self.unless_rising)} if self.unless_rising else {})}  # fmt: skip


def _significant(v: float) -> int:
    """Significant digits of `v` as printed shortest (7.9712 -> 5, 1.94 -> 3, 100.0 -> 1; trailing zeros a
    trainer printed are lost, which only makes a value count as coarser)."""
    return len(repr(abs(v)).split("e")[0].replace(".", "").strip("0"))

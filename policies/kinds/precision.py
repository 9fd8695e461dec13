"""Mixed precision: the dynamic loss scale collapsing (scale_collapse).

With fp16 dynamic loss scaling an overflowing step is skipped and the scale halved; a few halvings
at start-up are the scaler searching for its level (DeepSpeed starts at 2^16 or 2^32, fairseq at
128), and an isolated one later is normal. A scale halved on consecutive samples down to a tiny value
(or to zero) means every step overflows: the run no longer trains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from trainwarden.events.envelope import Event
from trainwarden.policies.kinds.values import METRIC_EVENTS, OneMetric
from trainwarden.policies.names import finite, fmt


@dataclass(frozen=True, slots=True)
class ScaleCollapse(OneMetric):
    """The loss scale fell on `halvings` samples in a row and is now under `below`, or is zero.

    A sample at the same scale (a step went through) or a higher one (the scaler grew it back) ends
    the run of halvings; so does nothing else.

    The start-up search is not a collapse: the halvings in a row from the first scale the run shows,
    when that is an initial scale (at least `search_from`: fairseq's 128 halved once; DeepSpeed, apex and
    torch start at 2^16, Megatron at 2^32), may go down to any scale (fairseq runs train at 2) and fire
    only under `search_floor` (1: DeepSpeed's minimum, which its own `reducing to 1` line reports) or at
    zero. The search is over once a sample holds or grows the scale, or the step moved on by more than
    `search_gap` since the last sample (steps went through at that scale): later halvings count as above.

    `unless_falling` (the loss): decided from the loss, not from the scale alone. A halving on a line whose
    loss is the lowest the run has shown (on any line) is dynamic loss scaling finding its level while
    steps go through (a healthy fp16 run halving again and again in its first few hundred updates, its loss
    finite and falling): it ends the run of halvings, and is judged against neither `below` nor
    `search_floor`. When every step overflows the weights no longer move, and the loss makes no new low.
    Halvings on lines without a loss (fairseq's `overflow detected, setting loss scale to: 0.0078125` between
    its progress lines, DeepSpeed's `OVERFLOW!` between HF Trainer's loss lines) after a new low wait for the
    next line with a loss, which decides them all: a new low again (ends them), or the collapse (a storm that
    never reaches such a line ends at the trainer's own minimum: DeepSpeed's `reducing to 1`, fairseq's
    `Minimum loss scale reached`). A scale of zero fires whatever the loss.
    """

    kind: ClassVar[str] = "scale_collapse"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    halvings: int = 2
    below: float = 16.0
    events: frozenset[str] = METRIC_EVENTS
    search_from: float = 64.0
    search_floor: float = 1.0
    search_gap: int = 100
    unless_falling: str | None = None

    @property
    def keys(self) -> tuple[str, ...]:  # the scale first: the index passes the first present
        return self.names + ((self.unless_falling,) if self.unless_falling else ())

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the last scale and the samples in a row it fell, whether those are the start-up search, the step of the
        # last sample (+ "metric", "path": its name, the scales seen falling; "low": the lowest `unless_falling`
        # beside the scale, "credit": whether the last line with one made a new low)
        return {"last": None, "falls": 0, "path": [], "search": None, "at": None}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        if name not in self.names:  # a line with the loss and no scale (HF Trainer's, beside DeepSpeed's notes)
            return self._loss_line(st, event)
        v = finite(event.data[name])
        if v is None:
            return None
        last = st["last"]
        path: list[float] = st["path"]
        pending = bool(st.get("credit")) and st["falls"] > 0  # halvings after a new low, waiting for a loss
        learning = self._new_low(st, event)  # None: no loss on this line
        step, at = event.data.get("step"), st.get("at")
        if type(step) is int:
            st["at"] = step
        if st.get("search") is None:  # the run's first scale: an initial one starts the search
            st["search"] = v >= self.search_from
        elif st["search"] and (
            (last is not None and v >= last) or (type(step) is int and type(at) is int and step - at > self.search_gap)
        ):
            st["search"] = False  # the scaler held a level: the search is over
        if last is not None and v < last and learning is not True:
            st["falls"] += 1
            path.append(v)
            if len(path) > self.halvings + 1:
                del path[0]
        elif pending and learning is False:
            pass  # no new low: the halvings waiting count (the line prints their scale, rounded: 0.00390625 as 0.004)
        else:
            st["falls"] = 0
            path.clear()
            path.append(v)
        st["last"], st["metric"] = v, name
        if learning or (learning is None and st.get("credit")):  # steps go through: the scaler finding its level
            return v <= 0  # (without a loss, after a new low: the next line with one decides)
        if st["search"]:
            return v <= 0 or v < self.search_floor
        return v <= 0 or (st["falls"] >= self.halvings and v < self.below)

    def _loss_line(self, st: dict[str, Any], event: Event) -> bool | None:
        """A loss without a scale: a new low ends the run of halvings; none, after halvings that waited for it,
        decides them (the scale is the last one seen)."""
        pending = bool(st.get("credit")) and st["falls"] > 0
        learning = self._new_low(st, event)
        last = st["last"]
        if learning and last is not None:
            st["falls"] = 0
            st["path"][:] = [last]
            return None
        if not pending or learning is None or last is None:
            return None
        if st["search"]:
            return last < self.search_floor or None
        return (st["falls"] >= self.halvings and last < self.below) or None

    def _new_low(self, st: dict[str, Any], event: Event) -> bool | None:
        """Whether `unless_falling` on this event is the lowest it has been (kept in `st`, and as "credit" for the
        scales without one that follow); None without a finite one on this event."""
        if self.unless_falling is None:
            return False
        loss = finite(event.data.get(self.unless_falling))
        if loss is None:
            return None
        low = st.get("low")
        if low is None or loss < low:
            st["low"] = loss
        st["credit"] = low is not None and loss < low
        return st["credit"]

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        m, v = st["metric"], st["last"]
        if v <= 0:
            return f"{m}={fmt(v)}: the loss scale reached zero", {m: v}
        path = " -> ".join(fmt(x) for x in st["path"])
        if st.get("search"):
            return f"{m} fell to {fmt(v)} in the start-up search ({path}): under {fmt(self.search_floor)}", {m: v}
        return f"{m} halved {st['falls']} times in a row to {fmt(v)} ({path}): every step overflows", {m: v}

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "halvings": self.halvings, "below": self.below,
                "event": sorted(self.events), "search_from": self.search_from, "search_floor": self.search_floor,
                "search_gap": self.search_gap, "unless_falling": self.unless_falling}  # fmt: skip

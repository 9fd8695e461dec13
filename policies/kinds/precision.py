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
    the run of halvings; so does nothing else. The start-up search stays far above `below`.
    """

    kind: ClassVar[str] = "scale_collapse"
    time_driven: ClassVar[bool] = False
    names: tuple[str, ...]
    halvings: int = 2
    below: float = 16.0
    events: frozenset[str] = METRIC_EVENTS

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the last scale and the samples in a row it fell (+ "metric", "path": its name, the scales seen falling)
        return {"last": None, "falls": 0, "path": []}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        assert name is not None  # a kind with keys: the index passes the first one present
        v = finite(event.data[name])
        if v is None:
            return None
        last = st["last"]
        path: list[float] = st["path"]
        if last is not None and v < last:
            st["falls"] += 1
            path.append(v)
            if len(path) > self.halvings + 1:
                del path[0]
        else:
            st["falls"] = 0
            path.clear()
            path.append(v)
        st["last"], st["metric"] = v, name
        return v <= 0 or (st["falls"] >= self.halvings and v < self.below)

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        m, v = st["metric"], st["last"]
        if v <= 0:
            return f"{m}={fmt(v)}: the loss scale reached zero", {m: v}
        path = " -> ".join(fmt(x) for x in st["path"])
        return f"{m} halved {st['falls']} times in a row to {fmt(v)} ({path}): every step overflows", {m: v}

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.names), "halvings": self.halvings, "below": self.below,
                "event": sorted(self.events)}  # fmt: skip

"""Judgement kinds on whatever a run evaluates: early stopping (`early_stop`) and a collapse (`collapse`).

Both read every eval metric whose direction the name tells (`core.metrics.direction`: mAP, accuracy, top-1,
BLEU, F1, AUC up; loss, WER, CER, error, perplexity down), so one rule covers an ultralytics `results.csv`, a
Keras `val_accuracy`, an xgboost `eval-logloss`. Their evidence is statistical: the default policy asks for a
guarded STOP (`confirm:`). State is a few numbers per eval metric (at most `MAX_METRICS` of them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from trainwarden.core.metrics import at_step, direction, quality, quantity
from trainwarden.events.envelope import Event
from trainwarden.policies.kinds.values import METRIC_EVENTS, POSITIONS, repeated
from trainwarden.policies.names import finite, fmt

MAX_METRICS = 16  # eval metrics followed per run: a run's eval line holds a handful
NAMED, QUALITY, LOSS = 0, 1, 2  # which eval metrics decide, strongest first (`_tier`)
_TIER_WORDS = {NAMED: "the primary metric", QUALITY: "its quality metrics", LOSS: "its eval losses"}


def _tier(name: str, named: tuple[str, ...]) -> int:
    """How much an eval metric says about the run: the one named (the launch config's `primary_metric`, or the
    rule's `metric:`), a quality metric (mAP, accuracy, WER, BLEU: `core.metrics.QUALITIES`), else a loss."""
    if name in named:
        return NAMED
    return QUALITY if quality(name) is not None else LOSS


def _named(config: dict[str, Any], metrics: tuple[str, ...]) -> list[str]:
    """The metric(s) that decide when named: the rule's own `metric:`, else the launch config's primary one."""
    if metrics:
        return list(metrics)
    from trainwarden.policies.primary import from_config  # deferred: primary.py imports the kinds package

    primary = from_config(config)
    return list(primary.names) if primary is not None else []


def _evals(st: dict[str, Any], data: Any, modes: dict[str, str]) -> list[tuple[str, float, str]]:
    """The new eval values of an event: (name, value, mode) for each eval metric with a direction, not repeated
    (a redraw, a doubled line, and an eval value carried unchanged on training lines: a loop printing its last
    `val_loss` on every step would otherwise count each step as an eval). Followed metrics are capped at
    `MAX_METRICS`."""
    per: dict[str, Any] = st["m"]
    out = []
    for key, raw in data.items():
        if key in POSITIONS:
            continue
        mode = modes.get(key)
        if mode is None:
            mode = direction(key) or ""
            if len(modes) < 4 * MAX_METRICS:
                modes[key] = mode
        if not mode or (key not in per and len(per) >= MAX_METRICS):
            continue
        v = finite(raw)
        if v is None:
            continue
        m = per.setdefault(key, {})
        if repeated(m, data, key, v):
            continue
        out.append((key, v, mode))
    return out


@dataclass(frozen=True, slots=True)
class EarlyStop:
    """Keras / Lightning `EarlyStopping` on whatever the run evaluates: the metrics that decide have not beaten
    their best for `patience` evals, and for `share` of the evals so far (the run's own length: a best in the
    first half of a long run that nothing came near since), e.g. no new best for max(10 evals, half the run).

    The metrics that decide, strongest first: those named (the rule's `metric:`, else the launch config's
    `primary_metric`), else the run's quality metrics (mAP, accuracy, WER, BLEU, F1, AUC), else its eval losses.
    When they disagree (a val loss rising while val accuracy still climbs: calibration drift) the stronger one
    decides; within one tier, the run is stale only when every metric is. A new best beats the old by more than
    `min_delta` (relative)."""

    kind: ClassVar[str] = "early_stop"
    time_driven: ClassVar[bool] = False
    planned: ClassVar[bool] = True  # the engine puts the run's progress (share of its planned length) in st
    metrics: tuple[str, ...] = ()
    patience: int = 10
    share: float = 0.5
    min_delta: float = 0.0
    plan_share: float = 0.25  # with a planned length: no new best for this share of it ...
    plan_patience: int = 5  # ... and this many evals
    events: frozenset[str] = METRIC_EVENTS
    keys: None = None

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # per eval metric ("m"): best, its step and epoch, evals seen and since the best (+ "rep": `repeated`);
        # the names that decide when named, the tier deciding, each name's direction (+ "why" when firing)
        return {"m": {}, "named": _named(config, self.metrics), "tier": LOSS, "modes": {}}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        found = _evals(st, event.data, st["modes"])
        if not found:
            return None
        done = (st.get("progress") or (None,))[0]  # the share of its planned length the run has done, if it says
        st["done"] = done
        named = tuple(st["named"])
        for key, v, mode in found:
            m = st["m"][key]
            st["tier"] = min(st["tier"], _tier(key, named))
            m["n"] = m.get("n", 0) + 1
            best = m.get("best")
            margin = self.min_delta * abs(best) if best is not None else 0.0
            if best is None or (v < best - margin if mode == "min" else v > best + margin):
                m["best"], m["since"], m["at"], m["ep"] = v, 0, event.data.get("step"), event.data.get("epoch")
                m["done"] = done
            else:
                m["since"] += 1
            m["last"] = v
        deciding = [k for k, m in st["m"].items() if "n" in m and _tier(k, named) == st["tier"]]
        stale = [k for k in deciding if self._stale(st["m"][k], done)]
        if (
            stale
            and all(st["m"][k]["last"] == st["m"][k]["best"] for k in stale)
            and self._others_improve(st, deciding, done)
        ):
            return False  # holding its best (a small eval set's 31/32 accuracy) while another eval metric improves
        if not deciding or len(stale) < len(deciding):
            return False
        st["why"] = max(stale, key=lambda k: st["m"][k]["since"])
        return True

    def _others_improve(self, st: dict[str, Any], deciding: list[str], done: float | None) -> bool:
        """Whether an eval metric that does not decide (a val loss beside the accuracy) still makes new bests."""
        return any("n" in m and not self._stale(m, done) for k, m in st["m"].items() if k not in deciding)

    def _stale(self, m: dict[str, Any], done: float | None) -> bool:
        """No new best for `plan_share` of the planned length and `plan_patience` evals, when the run states its
        length; else for `patience` evals and `share` of its evals so far."""
        at = m.get("done")
        if done is not None and at is not None:
            return bool(m["since"] >= self.plan_patience and done - at >= self.plan_share - 1e-9)  # (float sums)
        return bool(m["since"] >= max(self.patience, math.ceil(self.share * m["n"])))

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        key = st["why"]
        m = st["m"][key]
        where = at_step(m["at"]) + (f" (epoch {fmt(m['ep'])})" if m.get("ep") is not None else "")
        named = tuple(st["named"])
        others = [k for k in st["m"] if k != key and "n" in st["m"][k] and _tier(k, named) == st["tier"]]
        also = f" (nor has {', '.join(others[:3])}{', ...' if len(others) > 3 else ''})" if others else ""
        at, done = m.get("done"), st.get("done")
        held = f" ({done - at:.0%} of its planned length)" if at is not None and done is not None else ""
        return (
            f"{key} has not beaten its best {fmt(m['best'])}, at {where}, for {m['since']} evals of the run's "
            f"{m['n']}{held}{also}; it is {fmt(m['last'])} now, judged as {_TIER_WORDS[st['tier']]}: early "
            "stopping, keep the checkpoint of the best eval",
            {key: m["last"], "best": m["best"], "best_step": m["at"], "evals_since": m["since"], "evals": m["n"]},
        )

    def params(self) -> dict[str, Any]:
        return {"metric": list(self.metrics), "patience": self.patience, "share": self.share,
                "min_delta": self.min_delta, "plan_share": self.plan_share, "plan_patience": self.plan_patience,
                "event": sorted(self.events)}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Collapse:
    """An eval metric that loses `drop` of its value in one eval and stays down: top-1 77 -> 54. The level is
    the one the run held over the two evals before the fall (the worse of them: a lucky eval is no level), the
    fall must also be `noise` times the metric's usual move between evals (the median of the earlier ones, at
    least `min_evals` - 1 of them: an early, noisy detection run's mAP swings by 30% and is no collapse), and
    the condition holds while the value stays that far down (the rule's `for: 2 samples`: the next eval too).
    Quality metrics and error rates only (mAP, accuracy, BLEU, F1, AUC; WER, CER: up by `drop`): a loss that
    blows up is `runaway`'s."""

    kind: ClassVar[str] = "collapse"
    time_driven: ClassVar[bool] = False
    drop: float = 0.25
    noise: float = 4.0
    min_evals: int = 5
    window: int = 20
    events: frozenset[str] = METRIC_EVENTS
    keys: None = None

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # per eval metric ("m"): its last two values ("v"), recent moves between evals ("d"), the level it fell
        # from while it is down ("ref", with the step of the fall); each name's direction (+ "why" when firing)
        return {"m": {}, "modes": {}}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        found = _evals(st, event.data, st["modes"])
        found = [(k, v, mode) for k, v, mode in found if quantity(k) not in _LOSSY]
        if not found:
            return None
        down = None
        for key, v, mode in found:
            m = st["m"][key]
            last: list[float] = m.setdefault("v", [])
            moves: list[float] = m.setdefault("d", [])
            ref = m.get("ref")
            if ref is None and len(last) == 2 and len(moves) >= self.min_evals - 1:
                level = min(last) if mode == "max" else max(last)
                if self._fell(level, v, mode) and abs(level - v) >= self.noise * _median(moves):
                    m["ref"], m["from"], m["at"], m["first"] = level, last[-1], event.data.get("step"), v
                    ref = level
            elif ref is not None and not self._fell(ref, v, mode):
                m.pop("ref", None)  # back up: no collapse, the moves go on
                ref = None
            if ref is not None:
                m["now"], down = v, key
                continue
            if last:
                moves.append(abs(v - last[-1]))
                del moves[: -self.window]
            last.append(v)
            del last[:-2]
        if down is None:
            return False
        st["why"] = down
        return True

    def _fell(self, level: float, v: float, mode: str) -> bool:
        if mode == "max":
            return level > 0 and v <= level * (1 - self.drop)
        return level > 0 and v >= level * (1 + self.drop)

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        key = st["why"]
        m = st["m"][key]
        change = (m["first"] - m["ref"]) / m["ref"]
        return (
            f"{key} collapsed from {fmt(m['from'])} to {fmt(m['first'])} ({change:+.0%} of the level it held, "
            f"{fmt(m['ref'])}) in one eval at {at_step(m['at'])}, far beyond its usual move between evals "
            f"({fmt(_median(m['d']))}), and stays down ({fmt(m['now'])})",
            {key: m["now"], "before": m["from"], "level": m["ref"], "fell_to": m["first"], "fell_at": m["at"]},
        )

    def params(self) -> dict[str, Any]:
        return {"drop": self.drop, "noise": self.noise, "min_evals": self.min_evals, "window": self.window,
                "event": sorted(self.events)}  # fmt: skip


_LOSSY = frozenset({"loss", "perplexity"})  # a loss that blows up is `runaway`'s, not a collapse


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2

"""The throughput kind: a run that trains on, slower, judged against its own recent speed, with the likely cause.

A run that halves its speed costs half its GPUs and prints nothing wrong: its loss still falls. The monitoring
guide's rule: tokens/s that drops suddenly is an I/O bottleneck (a slow disk read of the training data) or another
process taking the GPU; NVML adds throttling (heat, power). The rate is what the run reports (tokens/s, samples/s,
steps/s: any training metric whose quantity is throughput in events.metrics) or, when it reports none, the steps
per second derived from the times its steps arrived. The cause is read from the agent's latest samples of the
run's GPUs (utilisation, throttle reasons, temperature, clocks, other processes) and processes (CPU %, wchan).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from trainwarden.core.metrics import quantity, role
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.policies.durations import fmt_duration
from trainwarden.policies.kinds.stall import WAITS
from trainwarden.policies.kinds.values import POSITIONS, has_training_value
from trainwarden.policies.names import finite

# throttle reasons (agent/nvml.py) that slow a busy GPU down; `applications_clocks`, `display_clocks`,
# `sync_boost` are settings, not a slowdown
THROTTLING = ("hw_thermal", "sw_thermal", "hw_slowdown", "hw_power_brake", "sw_power_cap")
UTIL_FELL = 0.6  # the GPU's utilisation fell with the throughput: now under 60% of what it was
CPU_BOUND_PCT = 90.0  # the run's processes use most of a core or more: busy computing (a CPU-bound input pipeline)
DISK_WAITS = ("disk I/O", "a network file system")  # the meanings (stall.WAITS) of a wait on storage
KEEP = 60  # rate samples kept for the recent level (thinned to one per window/KEEP seconds)


@dataclass(frozen=True, slots=True)
class Throughput:
    """The run's rate below `fraction` of its recent level (the median of its normal rates over the last `window`
    seconds before the drop) on every sample for `sustained` seconds. Rates from the first `warmup` seconds after
    its first step do not count (compilation, caches warming), and a level needs `min_samples` rates. A derived
    rate spans at least `span` seconds of steps (the agent reads a log in batches), and restarts after an eval
    (its eval values arrive) or once an eval or a save begins (a `phase` event): their pause between two steps is
    no slowdown. A sample back above the fraction
    resolves it."""

    kind: ClassVar[str] = "throughput"
    time_driven: ClassVar[bool] = False
    fraction: float = 0.5
    window: float = 600.0
    sustained: float = 300.0
    warmup: float = 300.0
    span: float = 30.0
    min_samples: int = 5
    events: frozenset[str] = frozenset({t.METRIC, t.GPU, t.HEALTH, t.PHASE})
    keys: None = None

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # t0: the first step's time; metric: the reported rate's name (None: derived from steps); pts: recent
        # [time, step] (derived); win: [time, rate] of normal rates; since/low: the low stretch's start and rates;
        # gpu: index -> its latest sample's fields; ub, tn: index -> its utilisation, throttle reasons while the
        # rate was normal;
        # cpu/wait: the latest process sample's CPU % and wchan
        return {"t0": None, "metric": None, "pts": [], "step": None, "win": [], "since": None, "low": [],
                "gpu": {}, "ub": {}, "tn": {}, "cpu": None, "wait": None}  # fmt: skip

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        data = event.data
        if event.type == t.GPU:
            _note_gpu(st, data, low=st["since"] is not None)
            return None
        if event.type == t.PHASE:
            if data.get("started") and st["step"] is not None:
                st["pts"] = []  # an eval or a save began: its pause is not training time; derive anew after it
            return None
        if event.type == t.HEALTH:
            if "alive" in data:
                cpu, waiting = data.get("cpu_pct"), data.get("waiting")
                st["cpu"] = cpu if isinstance(cpu, int | float) and not isinstance(cpu, bool) else None
                st["wait"] = waiting if isinstance(waiting, str) else None
            return None
        rate = self._rate(st, data, now)
        if st["t0"] is not None and now - st["t0"] < self.warmup:
            del st["pts"][:-1]  # a rate after the warm-up spans no step of it
            return None
        return None if rate is None else self._judge(st, rate, now)

    def _rate(self, st: dict[str, Any], data: dict[str, Any], now: float) -> float | None:
        """This metric event's rate: the run's reported throughput, else steps per second since a step `span`
        seconds back; None when it tells none."""
        if not has_training_value(data):
            if any(role(k) == "eval" for k in data) and st["step"] is not None:
                st["pts"] = [[now, st["step"]]]  # an eval ran: its pause is not training time
            return None
        if st["t0"] is None:
            st["t0"] = now
        st["at"] = data.get("step")
        reported = _reported(data, st["metric"])
        if reported is not None:
            st["metric"] = reported[0]
            return reported[1]
        step = finite(data.get("step"))
        if st["metric"] is not None or step is None or step == st["step"]:
            return None
        pts: list[list[float]] = st["pts"]
        if st["step"] is not None and step < st["step"]:
            pts.clear()  # the step count restarted (a new stage, a resumed run counting anew)
        st["step"] = step
        back = next((i for i in range(len(pts) - 1, -1, -1) if pts[i][0] <= now - self.span), None)
        pts.append([now, step])
        if back is None:
            return None
        del pts[:back]
        then, first = pts[0]
        return (step - first) / (now - then) if now > then and step > first else None

    def _judge(self, st: dict[str, Any], rate: float, now: float) -> bool:
        win: list[list[float]] = st["win"]
        level = _median([r for _, r in win]) if len(win) >= self.min_samples else None
        if level is not None and level > 0 and rate < self.fraction * level:
            if st["since"] is None:
                st["since"], st["low"], st["level"] = now, [], level
            st["low"] = [*st["low"][-(KEEP - 1) :], rate]
            st["now"] = now
            return now - st["since"] >= self.sustained
        st["since"], st["low"] = None, []
        if not win or now - win[-1][0] >= self.window / KEEP:
            win.append([now, rate])
        while win and win[0][0] < now - self.window:
            del win[0]
        return False

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        level, now_rate = st["level"], _median(st["low"])
        unit = st["metric"] or "it/s"
        held = st["now"] - st["since"]
        pct = round(100 * now_rate / level) if level else 0
        cause = likely_cause(st["gpu"], st["ub"], st["cpu"], st["wait"], st.get("tn", {}))
        why = f"throughput fell to {pct}% of its recent level ({unit} {_num(level)} -> {_num(now_rate)} for " \
              f"{fmt_duration(held)}): {cause}"  # fmt: skip
        values = {"rate": round(now_rate, 4), "level": round(level, 4), "fraction": round(now_rate / level, 3),
                  "unit": unit, "low_for_s": round(held, 1)}  # fmt: skip
        if st.get("at") is not None:
            values["step"] = st["at"]  # in the values only: the cause ends the reason
        return why, values

    def params(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "window": self.window, "sustained": self.sustained, "warmup": self.warmup,
                "span": self.span, "min_samples": self.min_samples}  # fmt: skip


def _reported(data: dict[str, Any], known: str | None) -> tuple[str, float] | None:
    """The run's own throughput in a metric event: the name it reported before, else the first training metric
    measuring throughput (tokens/s, samples/s, steps/s); None when the event has none."""
    if known is not None:
        value = finite(data.get(known))
        return (known, value) if value is not None else None
    for key, raw in data.items():
        if key not in POSITIONS and quantity(key) == "throughput" and role(key) == "train":
            value = finite(raw)
            if value is not None and value > 0:
                return key, value
    return None


def _note_gpu(st: dict[str, Any], data: dict[str, Any], *, low: bool) -> None:
    """Keep a GPU sample's fields the cause is named from; its utilisation while the rate is normal is the
    level the cause compares with (a slow moving mean, so one idle sample does not make it)."""
    index = data.get("gpu")
    if not isinstance(index, int):
        return
    key = str(index)  # JSON state: object keys are strings
    util = finite(data.get("gpu_util"))
    st["gpu"][key] = {k: data[k] for k in ("gpu_util", "gpu_temp", "throttle", "others", "clock_mhz",
                                           "clock_max_mhz", "power_w", "power_limit_w") if k in data}  # fmt: skip
    if util is not None and not low:
        before = st["ub"].get(key)
        st["ub"][key] = util if before is None else round(0.8 * before + 0.2 * util, 1)
    if not low:
        st["tn"][key] = list(data.get("throttle") or ())


def likely_cause(gpus: dict[str, dict[str, Any]], util_before: dict[str, float], cpu: float | None,
                 waiting: str | None, throttle_before: dict[str, list[str]] | None = None) -> str:  # fmt: skip
    """Pure: the likely cause of a slowdown from the latest samples, most certain first: another process on one
    of the run's GPUs, the GPU throttled for a reason it was not while the rate was normal (`throttle_before`: a
    GPU at its power cap all along did not slow the run down now), the input pipeline (the GPU's utilisation fell
    with the rate: waiting on disk I/O, or CPU-bound); else what the samples show."""
    found: list[str] = []
    for key in sorted(gpus, key=int):
        others = [o for o in gpus[key].get("others") or () if isinstance(o, dict)]
        if others:
            who = ", ".join(f"pid {o.get('pid')}" + (f", {o['name']}" if o.get("name") else "") for o in others[:3])
            more = f" and {len(others) - 3} more" if len(others) > 3 else ""
            found.append(f"another process on GPU {key} ({who}{more})")
    for key in sorted(gpus, key=int):
        if (throttled := _throttled(key, gpus[key], (throttle_before or {}).get(key, ()))) is not None:
            found.append(throttled)
    disk = _disk_wait(waiting)
    for key in sorted(gpus, key=int):
        now, before = finite(gpus[key].get("gpu_util")), util_before.get(key)
        if now is None or before is None or now >= UTIL_FELL * before:
            continue
        fell = f"GPU {key}'s utilisation fell with it ({before:.0f}% -> {now:.0f}%)"
        if disk:
            found.append(f"I/O: {fell} while its processes wait on {disk}")
        elif cpu is not None and cpu >= CPU_BOUND_PCT:
            found.append(f"the input pipeline: {fell} while its processes use {cpu:g}% CPU (CPU-bound data loading)")
        else:
            found.append(f"the input pipeline: {fell}, the GPU waits for data")
        break
    if not found and disk:
        found.append(f"I/O: its processes wait on {disk}")
    if found:
        return "; ".join(found)
    seen = [f"{fmt_util(k, gpus[k])}" for k in sorted(gpus, key=int) if "gpu_util" in gpus[k]]
    if cpu is not None:
        seen.append(f"its processes at {cpu:g}% CPU" + (f", waiting on {_wait_words(waiting)}" if waiting else ""))
    return "no cause seen in " + ("the samples (" + ", ".join(seen) + ")" if seen else "the samples (none yet)")


def fmt_util(key: str, gpu: dict[str, Any]) -> str:
    return f"GPU {key} at {gpu['gpu_util']:g}%"


def _throttled(key: str, gpu: dict[str, Any], before: Any) -> str | None:
    reasons = [r for r in gpu.get("throttle") or () if r in THROTTLING and r not in before]
    if not reasons:
        return None
    temp = finite(gpu.get("gpu_temp"))
    detail = list(reasons)
    if temp is not None:
        detail.append(f"{temp:g} C")
    clock, top = finite(gpu.get("clock_mhz")), finite(gpu.get("clock_max_mhz"))
    if clock is not None and top:
        detail.append(f"SM clock {clock:g}/{top:g} MHz")
    power, cap = finite(gpu.get("power_w")), finite(gpu.get("power_limit_w"))
    if "sw_power_cap" in reasons and power is not None and cap:
        detail.append(f"{power:g}/{cap:g} W")
    return f"GPU {key} throttled ({', '.join(detail)})"


def _disk_wait(wchan: str | None) -> str | None:
    """`disk I/O (the kernel's io_schedule)` when the run's processes wait on storage, else None."""
    if not wchan:
        return None
    meaning = next((words for part, words in WAITS if part in wchan), None)
    return f"{meaning} (the kernel's {wchan})" if meaning in DISK_WAITS else None


def _wait_words(wchan: str) -> str:
    meaning = next((words for part, words in WAITS if part in wchan), None)
    return f"{meaning} (the kernel's {wchan})" if meaning else f"the kernel's {wchan}"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _num(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"

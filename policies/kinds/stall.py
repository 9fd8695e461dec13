"""The stall kind: a run whose training steps stopped coming, judged against the run's own cadence.

A hung run (a deadlock, a collective waiting on a dead rank, a blocked read) costs every GPU it holds and prints
nothing: its process lives on, so no exit says it. What tells it is time: the run's steps came every few seconds
and none has come for many times that. The clock is the events' own time, moved by the agent's process samples
(every `process_interval_s`, 10 s) and heartbeats even when the log is silent, and by the workers' ticks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.policies.durations import fmt_duration
from trainwarden.policies.kinds.signals import ANY_INPUT
from trainwarden.policies.kinds.values import has_training_value

IDLE_CPU_PCT = 5.0  # a run's processes under this share of one core do nothing: waiting, not computing
# what the kernel function a process sleeps in (/proc/PID/wchan, agent.health) means, by a word of its name
WAITS = (("futex", "a lock or a condition (a futex)"), ("pipe", "a read from a pipe"), ("unix", "a socket"),
         ("sk_wait", "a socket"), ("tcp", "a socket"), ("epoll", "an event loop (epoll)"), ("poll", "poll/select"),
         ("nanosleep", "a sleep"), ("do_wait", "a child process"), ("io_schedule", "disk I/O"),
         ("folio", "disk I/O"), ("page", "disk I/O"), ("nfs", "a network file system"))  # fmt: skip


@dataclass(frozen=True, slots=True)
class Stall:
    """No new training step for `factor` x the usual gap between the run's steps (the median of the last
    `window` gaps), and at least `floor` seconds. Judged once `min_steps` steps were seen: before, the start-up
    rules speak (data loading and compilation take their time). A step is a metric event holding a training value
    at a new `step`; an eval's values alone are no step. The latest process sample says which stall it is: its
    processes idle (under 5% of a core) is a hang, said after `floor`; busy is a slow phase (an eval, a save, data
    loading) or a loop that logs nothing, and a collective spinning on a dead rank: said after `busy_floor`, which
    is PyTorch's collective timeout, so that a long eval or save is no alarm."""

    kind: ClassVar[str] = "stall"
    time_driven: ClassVar[bool] = True
    floor: float = 120.0
    busy_floor: float = 600.0
    factor: float = 3.0
    window: int = 20
    min_steps: int = 3
    events: frozenset[str] = ANY_INPUT
    keys: None = None

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the last step's time and value, steps seen (up to min_steps), the last `window` gaps between steps,
        # the latest process sample's CPU % and where it waits (+ "now": the time judged, when firing)
        return {"at": None, "step": None, "steps": 0, "gaps": [], "cpu": None, "wait": None}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        if event.type == t.METRIC:
            step = event.data.get("step")
            if step is not None and step != st["step"] and has_training_value(event.data):
                if st["at"] is not None and now >= st["at"]:
                    gaps: list[float] = st["gaps"]
                    gaps.append(round(now - st["at"], 3))
                    if len(gaps) > self.window:
                        del gaps[0]
                st["at"], st["step"] = now, step
                st["steps"] = min(st["steps"] + 1, self.min_steps)
                return False
        elif event.type == t.HEALTH and "alive" in event.data:
            cpu, waiting = event.data.get("cpu_pct"), event.data.get("waiting")
            st["cpu"] = cpu if isinstance(cpu, int | float) and not isinstance(cpu, bool) else None
            st["wait"] = waiting if isinstance(waiting, str) else None
        if st["at"] is None or st["steps"] < self.min_steps or not st["gaps"]:
            return False
        st["now"] = now
        return now - st["at"] >= self.budget(st)

    def budget(self, st: dict[str, Any]) -> float:
        busy = st.get("cpu") is not None and st["cpu"] >= IDLE_CPU_PCT
        return max(self.busy_floor if busy else self.floor, self.factor * _usual(st["gaps"]))

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        silent = st["now"] - st["at"]
        usual = _usual(st["gaps"])
        why = (
            f"no training step for {fmt_duration(silent)} after step {st['step']} (steps came every "
            f"{fmt_duration(usual)}; its budget is {fmt_duration(self.budget(st))})"
        )
        cpu, waiting = st.get("cpu"), st.get("wait")
        if cpu is not None:
            why += (
                f"; its processes use {cpu:g}% of a core: hung, waiting on {_waits_on(waiting)}"
                if cpu < IDLE_CPU_PCT
                else f"; its processes are busy ({cpu:g}% CPU): a slow phase (data, an eval, a save) or a loop "
                "that logs nothing"
            )
        values = {"silent_s": round(silent, 3), "usual_s": usual, "step": st["step"], "cpu_pct": cpu}
        return why, {**values, "waiting": waiting} if waiting else values

    def params(self) -> dict[str, Any]:
        return {"floor": self.floor, "busy_floor": self.busy_floor, "factor": self.factor, "window": self.window,
                "min_steps": self.min_steps}  # fmt: skip


def _usual(gaps: list[float]) -> float:
    """The run's usual gap between steps: the median of the last ones."""
    return sorted(gaps)[len(gaps) // 2]


def _waits_on(wchan: str | None) -> str:
    if wchan is None:
        return "something (a lock, a collective, a read)"
    meaning = next((words for part, words in WAITS if part in wchan), None)
    return f"{meaning} (the kernel's {wchan})" if meaning else f"the kernel's {wchan}"

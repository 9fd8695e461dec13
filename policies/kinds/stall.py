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

TRAIN, EVAL, SAVE = "train", "eval", "save"  # the phases of agent/phases.py
IDLE_CPU_PCT = 5.0  # a run's processes under this share of one core do nothing: waiting, not computing
# what the kernel function a process sleeps in (/proc/PID/wchan, agent.health) means, by a word of its name
WAITS = (("futex", "a lock or a condition (a futex)"), ("pipe", "a read from a pipe"), ("unix", "a socket"),
         ("sk_wait", "a socket"), ("tcp", "a socket"), ("epoll", "an event loop (epoll)"), ("poll", "poll/select"),
         ("nanosleep", "a sleep"), ("do_wait", "a child process"), ("io_schedule", "disk I/O"),
         ("folio", "disk I/O"), ("page", "disk I/O"), ("nfs", "a network file system"))  # fmt: skip


@dataclass(frozen=True, slots=True)
class Stall:
    """No progress for longer than the run's phase allows. Training steps: `factor` x the usual gap between the
    run's steps (the median of the last `window` gaps), and at least `floor` seconds; judged once `min_steps`
    steps were seen. A step is a metric event holding a training value at a new `step`; an eval's values alone
    are no step. The latest process sample says which stall it is: its processes idle (under 5% of a core) is a
    hang, said after `floor`; busy is a slow phase or a loop that logs nothing, and a collective spinning on a dead
    rank: said after `busy_floor`, PyTorch's collective timeout.

    Phases (a `phase` event, agent/phases.py: the frameworks' own eval and save lines) have budgets of their own,
    so a long eval or save is no alarm: an eval `eval_factor` x the run's usual eval (learned from its earlier
    evals), at least `eval_floor` (and `busy_floor` for a run's first eval, whose length is unknown); a save
    `save_budget`. Before the first step, `first_step_budget` from the run's start (data loading, compilation),
    unless the run reports metrics without training steps (evals only: it started). A step (or an eval's results,
    or a save's end) ends the phase. A run whose process died is no stall (process-dead says it)."""

    kind: ClassVar[str] = "stall"
    time_driven: ClassVar[bool] = True
    floor: float = 120.0
    busy_floor: float = 600.0
    factor: float = 3.0
    window: int = 20
    min_steps: int = 3
    eval_factor: float = 5.0
    eval_floor: float = 120.0
    save_budget: float = 900.0
    first_step_budget: float = 1200.0
    allow_early_stop: bool = False
    events: frozenset[str] = ANY_INPUT | {t.PHASE}
    keys: None = None

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        # the last step's time and value, steps seen (up to min_steps), the last `window` gaps between steps, the
        # latest process sample's CPU % and where it waits; the phase, when it began, the last progress ("since"),
        # the run's eval durations, whether it fires and how the last stall ended (+ "now": the time judged)
        return {"at": None, "step": None, "steps": 0, "gaps": [], "cpu": None, "wait": None, "start": start,
                "phase": TRAIN, "phase_at": None, "since": start, "evals": [], "firing": False,
                "ended": None}  # fmt: skip

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        if st.get("start") is None:
            st["start"] = st["since"] = now  # a state from before phases (or no known start): from now on
        if event.type == t.METRIC:
            step = event.data.get("step")
            if step is not None and step != st["step"] and has_training_value(event.data):
                if st["at"] is not None and now >= st["at"]:
                    gaps: list[float] = st["gaps"]
                    gaps.append(round(now - st["at"], 3))
                    if len(gaps) > self.window:
                        del gaps[0]
                self._progress(st, now)
                st["at"], st["step"] = now, step
                st["steps"] = min(st["steps"] + 1, self.min_steps)
                return False
            if st.get("phase") == EVAL and any(k.startswith("val_") for k in event.data):
                self._progress(st, now, "an eval's results came")  # the eval ended
            st["metrics"] = True  # a run that reports evals only started: no "no first step" for it
        elif event.type == t.PHASE:
            phase, started = event.data.get("phase"), event.data.get("started")
            if started is True and phase in (EVAL, SAVE) and phase != st.get("phase") and st["at"] is not None:
                self._progress(st, now, "an eval began" if phase == EVAL else "a checkpoint save began")
                st["phase"], st["phase_at"] = phase, now
            elif started is False and phase == st.get("phase"):
                self._progress(st, now, "the save finished" if phase == SAVE else "the eval finished")
        elif event.type == t.HEALTH and "alive" in event.data:
            st["dead"] = event.data.get("alive") is False  # a dead run is said by process-dead, not as a stall
            cpu, waiting = event.data.get("cpu_pct"), event.data.get("waiting")
            st["cpu"] = cpu if isinstance(cpu, int | float) and not isinstance(cpu, bool) else None
            st["wait"] = waiting if isinstance(waiting, str) else None
        if st.get("dead"):
            return False
        if st["at"] is None:
            if st.get("metrics"):
                return False
            st["now"] = now
            st["firing"] = now - st["start"] >= self.first_step_budget
            return bool(st["firing"])
        if st.get("phase", TRAIN) == TRAIN and (st["steps"] < self.min_steps or not st["gaps"]):
            return False
        st["now"] = now
        st["firing"] = now - self._since(st) >= self.budget(st)
        return bool(st["firing"])

    def _progress(self, st: dict[str, Any], now: float, what: str = "steps again") -> None:
        """Progress at `now`: the phase ends (an eval's length is learned), and a stall that held says how long."""
        lasted = round(now - self._since(st), 3)
        st["ended"] = {"lasted": lasted, "phase": _phase_name(st), "by": what} if st.get("firing") else None
        if st.get("phase") == EVAL and st.get("phase_at") is not None:
            evals: list[float] = st.setdefault("evals", [])
            evals.append(round(now - st["phase_at"], 3))
            del evals[: -self.window]
        st["phase"], st["phase_at"], st["since"], st["firing"] = TRAIN, None, now, False

    def _since(self, st: dict[str, Any]) -> float:
        """The last progress: a step, or a phase's start or end (a state from before phases: the last step)."""
        since = st.get("since")
        return float(st["at"] if since is None else max(since, st["at"] or since))

    def budget(self, st: dict[str, Any]) -> float:
        phase = st.get("phase", TRAIN)
        if st["at"] is None:
            return self.first_step_budget
        if phase == SAVE:
            return self.save_budget
        if phase == EVAL:
            evals = st.get("evals") or []
            return (
                max(self.eval_floor, self.eval_factor * _usual(evals))
                if evals
                else max(self.eval_floor, self.busy_floor)
            )
        busy = st.get("cpu") is not None and st["cpu"] >= IDLE_CPU_PCT
        return max(self.busy_floor if busy else self.floor, self.factor * _usual(st["gaps"]))

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        phase, budget = st.get("phase", TRAIN), self.budget(st)
        if st["at"] is None:
            silent = st["now"] - st["start"]
            why = f"no first training step for {fmt_duration(silent)} after start: still loading data or compiling?"
            return why, {"silent_s": round(silent, 3), "phase": "start-up", "budget_s": budget}
        silent = st["now"] - self._since(st)
        usual = _usual(st["gaps"]) if st["gaps"] else None
        if phase == SAVE:
            why = f"saving a checkpoint for {fmt_duration(silent)} (budget {fmt_duration(budget)})"
        elif phase == EVAL:
            evals = st.get("evals") or []
            before = f"evals took {fmt_duration(_usual(evals))} before" if evals else "the run's first eval"
            why = f"no progress for {fmt_duration(silent)} in eval ({before}; its budget is {fmt_duration(budget)})"
        else:
            every = f"steps came every {fmt_duration(usual)}; " if usual is not None else ""
            why = (f"no training step for {fmt_duration(silent)} after step {st['step']} ({every}its budget is "
                   f"{fmt_duration(budget)})")  # fmt: skip
        cpu, waiting = st.get("cpu"), st.get("wait")
        if cpu is not None:
            why += (
                f"; its processes use {cpu:g}% of a core: hung, waiting on {_waits_on(waiting)}"
                if cpu < IDLE_CPU_PCT
                else f"; its processes are busy ({cpu:g}% CPU): a slow phase (data, an eval, a save) or a loop "
                "that logs nothing"
            )
        values = {"silent_s": round(silent, 3), "usual_s": usual, "step": st["step"], "cpu_pct": cpu,
                  "phase": phase, "budget_s": budget}  # fmt: skip
        return why, {**values, "waiting": waiting} if waiting else values

    def resolved(self, st: dict[str, Any]) -> str | None:
        """How the stall that just ended went: said in anomaly.resolved's reason."""
        ended = st.get("ended")
        if not ended:
            return None
        return f"{ended.get('by', 'steps again')} after {fmt_duration(ended['lasted'])} stalled in {ended['phase']}"

    def params(self) -> dict[str, Any]:
        return {"floor": self.floor, "busy_floor": self.busy_floor, "factor": self.factor, "window": self.window,
                "min_steps": self.min_steps, "eval_factor": self.eval_factor, "eval_floor": self.eval_floor,
                "save_budget": self.save_budget, "first_step_budget": self.first_step_budget,
                "allow_early_stop": self.allow_early_stop}  # fmt: skip

    def earliest(self) -> tuple[str, float]:
        """The shortest budget this rule may act on (its parameter's name and seconds): a STOP sooner than the
        collective timeout needs `allow_early_stop` (policies/loader.py)."""
        budgets = {"floor": self.floor, "busy_floor": self.busy_floor, "eval_floor": self.eval_floor,
                   "save_budget": self.save_budget, "first_step_budget": self.first_step_budget}  # fmt: skip
        return min(budgets.items(), key=lambda kv: kv[1])


def _phase_name(st: dict[str, Any]) -> str:
    if st["at"] is None:
        return "start-up"
    return {EVAL: "eval", SAVE: "a checkpoint save"}.get(st.get("phase", TRAIN), "training")


def _usual(gaps: list[float]) -> float:
    """The run's usual gap between steps: the median of the last ones."""
    return sorted(gaps)[len(gaps) // 2]


def _waits_on(wchan: str | None) -> str:
    if wchan is None:
        return "something (a lock, a collective, a read)"
    meaning = next((words for part, words in WAITS if part in wchan), None)
    return f"{meaning} (the kernel's {wchan})" if meaning else f"the kernel's {wchan}"

"""Plans (the seed's Step 5): a DAG of experiments run on free GPUs across servers.

Pure: the plan file, the plan's state folded from its events, and `next_steps` deciding what to
launch, block or record next. `workers/planner.py` does the I/O.

States of an experiment in a plan: pending -> launching -> running -> finished | failed | stopped,
or pending -> blocked (a parent did not finish) | refused (the launch was refused, e.g. preflight).
`launching` is written before the launch, so a runner that dies mid-launch is followed by one
that adopts the run it started (or launches again) instead of starting it twice.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from trainwarden.core.yamlfile import Context, Reader, compose, empty_mapping, read_text
from trainwarden.events import types as t
from trainwarden.events.dispatch import Dispatch
from trainwarden.events.envelope import RUN_NAME_RE, Event
from trainwarden.events.payloads import PlanStartedData, PlanStepData
from trainwarden.events.projection import RunState
from trainwarden.remote.fleet import Fleet

PLAN_PREFIX = "plan-"  # a plan's events live in their own log, named like a run
TERMINAL = frozenset({"finished", "failed", "stopped", "blocked", "refused"})
NOT_FINISHED = frozenset({"failed", "stopped", "blocked", "refused"})
ACTIVE = frozenset({"launching", "running"})


@dataclass(frozen=True, slots=True)
class Plan:
    name: str
    experiments: tuple[str, ...]
    max_parallel: int | None = None
    source: str = ""

    @property
    def stream(self) -> str:
        """The plan's events live in their own log, named like a run."""
        return f"{PLAN_PREFIX}{self.name}"


def parse_plan(path: Path, fleet: Fleet) -> Plan:
    """Read a plan file; raises YamlFileError listing every problem as file:line:column."""
    root = compose(read_text(path), str(path))
    ctx = Context(source=str(path))
    r = Reader(root if root is not None else empty_mapping(), ctx, "a plan")
    name = r.string("name", required=True)
    if name is not None and not RUN_NAME_RE.match(f"{PLAN_PREFIX}{name}"):
        r.fail("name", f"plan name {name!r} must be letters, digits, '_', '.', '-'")
    entries = r.string_list("experiments")
    r.needs(("experiments",), "a plan needs 'experiments', the list of experiments to run")
    names = [exp for _, exp in entries]
    for node, exp in entries:
        if exp not in fleet.experiments:
            close = difflib.get_close_matches(exp, list(fleet.experiments), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            ctx.problem(node, f"unknown experiment {exp!r}{hint}")
            continue
        for dep in fleet.experiments[exp].depends_on:
            if dep not in names:
                ctx.problem(node, f"{exp} depends on {dep}, which is not in the plan; add it to experiments")
    if len(set(names)) != len(names):
        r.fail("experiments", "an experiment is listed twice")
    max_parallel = r.integer("max_parallel", minimum=1)
    r.finish()
    ctx.check()
    return Plan(name=name or "", experiments=tuple(names), max_parallel=max_parallel, source=str(path))


@dataclass(slots=True)
class PlanState:
    started: bool = False
    finished: bool = False
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)  # experiment -> latest plan.step data
    since: dict[str, float] = field(default_factory=dict)  # experiment -> when its latest plan.step was recorded
    started_at: float | None = None  # the latest plan.started: the newest plan governs an experiment (plan_gate.py)
    depends_on: dict[str, list[str]] = field(default_factory=dict)  # as the plan ran it (plan.started)

    def state_of(self, experiment: str) -> str:
        return self.steps.get(experiment, {}).get("state", "pending")


_FOLD: Dispatch[Callable[[PlanState, Event], None]] = Dispatch("the plan's fold")


def fold_plan(events: Iterable[Event]) -> PlanState:
    state = PlanState()
    for e in events:
        handler = _FOLD.handlers.get(e.type)
        if handler is not None:
            handler(state, e)
    return state


@_FOLD.on(t.PLAN_STARTED)
def _started(state: PlanState, e: Event) -> None:
    state.started = True
    state.started_at = e.ts
    started = cast(PlanStartedData, e.data)
    state.depends_on = {n: list(started.get("depends_on", {}).get(n, [])) for n in started.get("experiments", [])}


@_FOLD.on(t.PLAN_STEP)
def _step(state: PlanState, e: Event) -> None:
    name = cast(PlanStepData, e.data)["experiment"]
    state.steps[name] = dict(e.data)
    state.since[name] = e.ts


@_FOLD.on(t.PLAN_FINISHED)
def _finished(state: PlanState, e: Event) -> None:
    state.finished = True


def run_status(run: RunState, *, since_seq: int | None) -> str:
    """How the plan's launch of a run is doing: running | finished | failed | stopped.

    A failed attempt that the workers will resume (restarts left) still counts as running.
    """
    if since_seq is not None and (run.launch_seq or 0) < since_seq:
        return "running"  # the log has not caught up with our launch yet
    if run.status == "finished":
        return "finished"
    if run.status == "stopped":
        return "stopped"
    if run.status == "failed":
        attempt = int(run.launch.get("attempt", 1))
        restarts_left = int(run.launch.get("max_restarts", 0)) - (attempt - 1)
        return "running" if restarts_left > 0 and run.launch.get("resumable") else "failed"
    return "running"


@dataclass(frozen=True, slots=True)
class Step:
    experiment: str
    state: str  # the new state: running (launch it) | finished | failed | stopped | blocked
    gpus: tuple[int, ...] = ()
    reason: str = ""


def next_steps(plan: Plan, state: PlanState, statuses: Mapping[str, str], fleet: Fleet) -> list[Step]:
    """What to record or launch now, in plan order. Pure."""
    steps: list[Step] = []
    current = {name: state.state_of(name) for name in plan.experiments}
    for name in plan.experiments:
        if current[name] == "running" and statuses.get(name, "running") != "running":
            current[name] = statuses[name]
            steps.append(Step(name, statuses[name]))
    held: dict[str, set[int]] = {}
    for name in plan.experiments:
        if current[name] in ACTIVE:
            held.setdefault(fleet.experiments[name].server, set()).update(state.steps.get(name, {}).get("gpus", ()))
    running = sum(1 for s in current.values() if s in ACTIVE)
    changed = True
    while changed:  # a block can block grandchildren in the same pass
        changed = False
        for name in plan.experiments:
            if current[name] != "pending":
                continue
            bad = [d for d in fleet.experiments[name].depends_on if current[d] in NOT_FINISHED]
            if bad:
                current[name] = "blocked"
                steps.append(Step(name, "blocked", reason=f"{bad[0]} {current[bad[0]]}; it must finish first"))
                changed = True
    for name in plan.experiments:
        experiment = fleet.experiments[name]
        if current[name] != "pending" or any(current[d] != "finished" for d in experiment.depends_on):
            continue
        if plan.max_parallel is not None and running >= plan.max_parallel:
            break
        gpus = allocate(experiment.gpus, experiment.gpu_ids, fleet.servers[experiment.server].gpus,
                        held.get(experiment.server, set()))  # fmt: skip
        if gpus is None:
            continue
        held.setdefault(experiment.server, set()).update(gpus)
        current[name] = "running"
        running += 1
        steps.append(Step(name, "running", gpus=gpus))
    return steps


def allocate(
    count: int, pinned: Sequence[int] | None, server_gpus: Sequence[int], held: set[int]
) -> tuple[int, ...] | None:
    """GPUs for a run, never one another run of the plan holds; None when they are not free now."""
    if pinned is not None:
        return tuple(pinned) if not set(pinned) & held else None
    free = [g for g in (server_gpus or range(count)) if g not in held]
    return tuple(free[:count]) if len(free) >= count else None


def is_done(plan: Plan, state: PlanState) -> bool:
    return all(state.state_of(name) in TERMINAL for name in plan.experiments)

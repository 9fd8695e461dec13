"""Remote runs: preflight, plans, checkpoints.
Each payload class, then its type's one declaration (events/registry.py).

No `from __future__ import annotations`: Python 3.11 reads `NotRequired` from evaluated annotations only.
"""

from typing import NotRequired, TypedDict

from trainwarden.events.registry import PLAN, declare


class PreflightData(TypedDict):
    experiment: str
    server: str
    check: str  # the check's name
    ok: bool
    detail: str  # what it found
    remedy: str | None  # how to fix a failed check


declare(
    "preflight",
    PreflightData,
    meaning="one preflight check of an experiment on a server",
    emitted_by="the launcher (remote/launch.py)",
    worker_output=True,
)


class LaunchRefusedData(TypedDict):
    experiment: str
    server: str
    check: str  # the check that failed: a preflight check, wandb_guard, or plan (a plan holds it back)
    reason: str


declare(
    "launch.refused",
    LaunchRefusedData,
    meaning="a launch was refused by a preflight check",
    emitted_by="the launcher (remote/launch.py)",
)


class PlanStartedData(TypedDict):
    plan: str
    experiments: list[str]
    depends_on: dict[str, list[str]]  # experiment -> the experiments it waits for
    source: str  # the plan's file


declare(
    "plan.started",
    PlanStartedData,
    meaning="a plan (experiments with dependencies) began",
    emitted_by="planner (remote/planner.py)",
    log=PLAN,
)


class PlanStepData(TypedDict):
    plan: str
    experiment: str
    state: str  # launching | running | refused | finished | failed | stopped | blocked
    reason: NotRequired[str]
    gpus: NotRequired[list[int]]
    at: NotRequired[float]  # when the launch began
    server: NotRequired[str]
    launch_seq: NotRequired[int]  # seq of its run.launched


declare(
    "plan.step",
    PlanStepData,
    meaning="one experiment of a plan changed state",
    emitted_by="planner (remote/planner.py)",
    log=PLAN,
)


class PlanFinishedData(TypedDict):
    plan: str
    experiments: dict[str, str]  # experiment -> its final state


declare(
    "plan.finished",
    PlanFinishedData,
    meaning="every experiment of a plan is done: how each ended",
    emitted_by="planner (remote/planner.py)",
    log=PLAN,
)


class CheckpointSavedData(TypedDict, total=False):
    path: str
    metric: float  # the value of the experiment's best_metric


declare(
    "checkpoint.saved",
    CheckpointSavedData,
    meaning="the training code saved a checkpoint (its metric ranks it for retention)",
    emitted_by="the training code itself; read by `trainwarden checkpoints`, `collect`",
    activity=True,
)


class CheckpointDeletedData(TypedDict):
    path: str  # the deleted file
    server: str
    reason: str  # why retention let it go


declare(
    "checkpoint.deleted",
    CheckpointDeletedData,
    meaning="checkpoint retention deleted a file",
    emitted_by="CLI (`trainwarden checkpoints --apply`, trainwarden/cli/remote.py)",
)

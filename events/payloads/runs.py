"""A run's life: launched, watched, started, ended.
Each payload class, then its type's one declaration (events/registry.py).

No `from __future__ import annotations`: Python 3.11 reads `NotRequired` from evaluated annotations only.
"""

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from trainwarden.core.words import said
from trainwarden.events.registry import declare

if TYPE_CHECKING:
    from trainwarden.events.envelope import Event


class WandbNames(TypedDict):
    project: str | None
    group: str | None
    run_name: str | None
    entity: str | None


class ResumedAfterData(TypedDict):
    """Why the workers relaunched a run: its failure as the fold knew it when they resumed it."""

    failure: str  # id of the run.failed
    exit_code: int | None  # the failed attempt's (128+N: killed by signal N)
    rule: str | None  # the critical anomaly open when it failed (a log rule: OOM, NCCL timeout, ...)


class ForcedLaunch(TypedDict):
    """A launch that a plan held back, started anyway with --force: who, when, and what it overrode."""

    by: str  # the local user (CLI) or the Slack user (/launch ... --force)
    at: float
    plan: str
    overrode: str  # the plan's refusal, as it would have been said


class RunLaunchedData(TypedDict, total=False):
    """Local launches (`trainwarden launch RUN -- CMD`) write the first group; launches of an
    experiment from servers.yaml (CLI, plan, /launch, resume) the rest as well."""

    host: str
    session: str
    tmux_socket: str | None
    log_path: str
    workdir: str
    command: list[str]
    stop_command: list[str] | None
    env: dict[str, str]
    config: dict[str, Any]  # the policy's baselines (`config_key`) are looked up here
    uses_wandb: bool  # false: launched with --no-wandb (W&B neither read nor expected); true: its launch exports
    # WANDB_* variables or names a W&B project; absent: the agent tells
    allow_offline_wandb: bool  # its experiment allows W&B offline: the agent reports no offline W&B (no STOP)
    experiment: str
    server: str
    pid: int | None
    exit_file: str
    run_dir: str
    gpus: list[int]
    stop_grace_s: float
    attempt: int  # 1 for the first launch, n+1 for the n-th automatic resume
    resume: bool
    max_restarts: int
    resumable: bool
    wandb: WandbNames
    total_steps: int | None
    epochs: int | None
    baseline: dict[str, Any] | None
    plan: str  # the plan that launched it
    requested_by: str  # the Slack user who asked for it (/launch)
    owner: str | None  # the experiment's `owner` (a Slack user id)
    checkpoint: str  # a resume: the checkpoint file its resume_command was given
    resumed_after: ResumedAfterData  # an automatic resume: the failure it follows
    forced: ForcedLaunch  # launched outside the plan that held it back (--force)


def _launched(event: "Event") -> str:
    launched = cast(RunLaunchedData, event.data)
    session = f"session {launched['session']}" if launched.get("session") else "no tmux session"
    log_path = said(launched.get("log_path"), "not recorded")
    return f"{session} on {said(launched.get('host'), event.host)}, log {log_path}{resumed(launched)}"


def is_resume(launched: RunLaunchedData) -> bool:
    """Whether a launch carries on the run before it (an automatic resume, `launch --resume`): else it is a new
    launch of the name, which starts with a state and a Slack thread of its own."""
    return bool(launched.get("resume")) or int(launched.get("attempt") or 1) > 1


def resumed(launched: RunLaunchedData) -> str:
    """`, attempt 2, resumed from /ck/epoch_9.pt after exit code 137` for a resume; nothing for a first launch."""
    if not is_resume(launched):
        return ""
    start = f" from {launched['checkpoint']}" if launched.get("checkpoint") else ""
    after = launched.get("resumed_after")
    cause = f" after exit code {said(after.get('exit_code'), 'unknown')}" if after else ""
    rule = f" ({after['rule']})" if after and after.get("rule") else ""
    return f", attempt {said(launched.get('attempt'), '?')}, resumed{start}{cause}{rule}"


declare(
    "run.launched",
    RunLaunchedData,
    meaning="a run was started in tmux, locally or on a server; a relaunch starts a new launch (its seq identifies it)",
    emitted_by="CLI, bot, planner, workers' resume (remote/launch.py, remote/local_launch.py)",
    describe=_launched,
    activity=True,
)


class RunWatchedData(TypedDict):
    """What the agent on `host` knows of a run it watches: where its log is and how it can be stopped
    (by that agent: a stop_command, Ctrl-C to its tmux session, or signals to its pid / matching processes)."""

    host: str
    log_path: str
    pid: int | None  # the training process, when given
    match: str | None  # a regular expression over the command lines of the run's processes
    session: str | None  # its tmux session
    tmux_socket: str | None
    stop_command: list[str] | None  # argv run by the agent, no shell
    stop_grace_s: float  # how long a Ctrl-C / SIGINT, then SIGTERM, is given before the next step
    control: str | None  # the control-stream entry that registered it (None: the settings or --watch)


declare(
    "run.watched",
    RunWatchedData,
    meaning="an agent watches a run it did not launch (`trainwarden watch`, settings, --watch): how to stop it",
    emitted_by="agent (agent/runner.py)",
    activity=True,
)


class RunStartedData(TypedDict):
    pid: int | None  # the training process (None when it could not be read)
    server: str  # the server in servers.yaml
    launch: str  # id of the run.launched it follows


declare(
    "run.started",
    RunStartedData,
    meaning="the launched run's process is up (its pid)",
    emitted_by="the launcher (remote/launch.py)",
    activity=True,
)


class RunEndedData(TypedDict):
    """`run.finished` (exit code 0, or none for a run added with `watch --pid/--match`: it ended, its exit
    code unknowable) and `run.failed`."""

    exit_code: int | None  # None: the process vanished without an exit file
    by: NotRequired[str]  # agent@HOST when the agent saw it
    attempt: NotRequired[int]  # which launch of the experiment: 1, then 2 after the first automatic resume, ...
    launch: NotRequired[int]  # seq of the run.launched that ended (a relaunch may already be recorded)
    log_tail: NotRequired[list[str]]  # last log lines, secrets masked (failures only)
    reason: NotRequired[str]


declare(
    "run.finished",
    RunEndedData,
    meaning="the run's process exited with code 0 (or, added with `watch --pid/--match`, ended: its code unknowable)",
    emitted_by="agent (agent/watcher.py), planner's liveness check (remote/liveness.py)",
    activity=True,
)

declare(
    "run.failed",
    RunEndedData,
    meaning="the run's process exited with a non-zero code, or vanished",
    emitted_by="agent (agent/watcher.py), planner's liveness check (remote/liveness.py)",
    activity=True,
)

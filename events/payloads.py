"""The `data` of each event type, as TypedDicts: payloads stay plain dicts on the wire (and in old logs),
so a type checker checks the keys where they are built and read while nothing changes at run time.

A field is `NotRequired` where some producer leaves it out (see the catalogue for who emits what);
`total=False` where the producers differ enough that every field is optional. A reader of a log
written by an older or newer version must still use `.get` for optional fields: these types say
what the producers of this version write, not what every log holds.

No `from __future__ import annotations` here: Python 3.11 reads `NotRequired` from evaluated
annotations only, and the catalogue renders docs/events.md from `__required_keys__`.
"""

from typing import Any, NotRequired, TypedDict

# -- a run's life ---------------------------------------------------------------------------------


class WandbNames(TypedDict):
    project: str | None
    group: str | None
    run_name: str | None
    entity: str | None


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


class RunStartedData(TypedDict):
    pid: int | None
    server: str
    launch: str  # id of the run.launched it follows


class RunEndedData(TypedDict):
    """`run.finished` (exit code 0) and `run.failed`."""

    exit_code: int | None  # None: the process vanished without an exit file
    by: NotRequired[str]  # agent@HOST when the agent saw it
    attempt: NotRequired[int]
    launch: NotRequired[int]  # seq of the run.launched that ended (a relaunch may already be recorded)
    log_tail: NotRequired[list[str]]  # last log lines, secrets masked (failures only)
    reason: NotRequired[str]


# -- what the agent observes ----------------------------------------------------------------------


class MetricData(TypedDict, total=False):
    """Known keys only: every other key is a metric, its canonical name -> a number (NaN/Inf kept)."""

    step: int
    epoch: float


class GpuData(TypedDict, total=False):
    gpu: int  # index
    uuid: str
    name: str
    gpu_util: float  # % of time a kernel ran
    mem_util: float
    mem_used_mb: float
    mem_total_mb: float
    gpu_temp: float
    power_w: float
    throttle: list[str]
    ecc_corrected: int
    ecc_uncorrected: int
    mapped: str  # process: the run's processes are on it; config: the run's `gpus` say so


class GpuXidData(TypedDict):
    gpu: int
    uuid: str
    xid: int
    meaning: str
    severity: str  # critical | error | warning
    mapped: bool  # False: on a GPU no run is known to use (sent to every run)


class HealthData(TypedDict, total=False):
    """A process sample (alive, pid, processes, rss_mb, cpu_pct) or a guard finding (check, ok, ...)."""

    alive: bool
    pid: int
    processes: int
    rss_mb: float
    cpu_pct: float
    check: str  # wandb_mode
    ok: bool
    wandb_mode: str
    variable: str
    process: str
    reason: str


class LogLineData(TypedDict):
    tag: str
    line: str  # secrets masked
    lines: NotRequired[int]  # a traceback grouped into one event: how many lines


class AgentHeartbeatData(TypedDict):
    interval_s: float
    versions: dict[str, str | None]
    gpu: dict[str, Any]
    sources: dict[str, Any]
    spool: dict[str, Any]
    runs_watched: int


class SourceStatusData(TypedDict):
    source: str  # metrics: the run's data source; nvml: GPU sampling
    status: str  # wandb_ok | log_fallback | unreachable (metrics); unavailable (nvml)
    reason: str
    previous: NotRequired[str | None]
    url: NotRequired[str | None]


# -- what the workers decide and do ---------------------------------------------------------------


class DecisionData(TypedDict):
    decision: str  # STOP | WAIT | CONTINUE
    rule: str | None
    reason: str
    trigger: str  # id of the event that caused it
    policy: str  # hash of the policy that decided
    values: NotRequired[dict[str, Any]]
    severity: NotRequired[str]
    remedy: NotRequired[str | None]
    anomaly: NotRequired[str | None]  # id of the event that opened the rule's anomaly
    confirm_s: NotRequired[float]  # a guarded STOP: a person has this long to keep it running
    run_host: NotRequired[str]


class AnomalyOpenedData(TypedDict):
    rule: str
    severity: str
    reason: str
    values: dict[str, Any]
    remedy: str | None
    decision: str | None
    trigger: str
    policy: str
    run_host: NotRequired[str]


class AnomalyResolvedData(TypedDict):
    rule: str
    reason: str
    opened_by: str | None
    policy: str
    trigger: NotRequired[str]  # absent when the rule left the policy
    run_host: NotRequired[str]


class EvidenceBuiltData(TypedDict):
    decision: str
    rule: str | None
    path: str
    files: list[str]
    findings: str | None
    summary: str
    run_host: str


class StopRequestedData(TypedDict, total=False):
    by: str  # policy | slack | cli
    user: str
    rule: str | None
    reason: str
    decision: str | None  # id of the decision it carries out; None for a /stop or a CLI stop tied to none
    run_host: str


class StopResultData(TypedDict):
    """`stop.done` (with `detail`) and `stop.failed` (with `error` and `hint`)."""

    request: str
    method: str
    session: str | None
    run_host: str
    reason: str | None
    detail: NotRequired[str]
    error: NotRequired[str]
    hint: NotRequired[str]


class ResumeSkippedData(TypedDict):
    reason: str
    failure: str  # id of the run.failed


class TickData(TypedDict):
    due: float


class PolicyLoadedData(TypedDict):
    policy: str
    name: str
    source: str
    rules: int
    sha256: str | None
    text: str | None  # None for a policy built in code: replay --verify then needs --policy


class PolicyRejectedData(TypedDict):
    source: str
    problems: list[str]  # file:line:column: what is wrong
    kept: str  # hash of the policy still in force


# functional form: "from" (the first stream entry the policy evaluated) is a Python keyword
PolicyAppliedData = TypedDict(
    "PolicyAppliedData",
    {"policy": str, "name": str, "previous": str | None, "from": NotRequired[str], "run_host": NotRequired[str]},
)

# -- people, Slack, the watchdog ------------------------------------------------------------------


class CommandData(TypedDict):
    """`command.received` and `command.denied`."""

    command: str
    user: str
    channel: str
    via: str  # slash | button
    text: str


class SnoozeSetData(TypedDict, total=False):
    by: str
    rule: str | None  # None: every rule
    until: float
    user: str
    seconds: float
    decision: str


class StopCancelledData(TypedDict):
    by: str
    user: str
    rule: str
    until: float
    decision: str  # id of the guarded STOP decision kept running


class LaunchFailedData(TypedDict):
    by: str
    server: str
    user: str
    error: str


class NotificationData(TypedDict):
    """`notification.intent` (with `at`) and `notification.sent` (with `ts`, `reconciled`)."""

    key: str
    channel: str
    thread_ts: str | None
    text: str
    at: NotRequired[float]
    ts: NotRequired[str | None]
    reconciled: NotRequired[bool]


class WatchdogStalledData(TypedDict):
    detail: str
    since: float


class WatchdogRecoveredData(TypedDict):
    detail: str
    stalled_s: float


# -- remote runs: preflight, plans, checkpoints ---------------------------------------------------


class PreflightData(TypedDict):
    experiment: str
    server: str
    check: str
    ok: bool
    detail: str
    remedy: str | None


class LaunchRefusedData(TypedDict):
    experiment: str
    server: str
    check: str
    reason: str


class PlanStartedData(TypedDict):
    plan: str
    experiments: list[str]
    depends_on: dict[str, list[str]]
    source: str


class PlanStepData(TypedDict):
    plan: str
    experiment: str
    state: str  # launching | running | refused | finished | failed | stopped | blocked
    reason: NotRequired[str]
    gpus: NotRequired[list[int]]
    at: NotRequired[float]
    server: NotRequired[str]
    launch_seq: NotRequired[int]


class PlanFinishedData(TypedDict):
    plan: str
    experiments: dict[str, str]  # experiment -> its final state


class CheckpointSavedData(TypedDict, total=False):
    path: str
    metric: float  # the value of the experiment's best_metric


class CheckpointDeletedData(TypedDict):
    path: str
    server: str
    reason: str

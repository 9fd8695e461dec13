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


class RunStartedData(TypedDict):
    pid: int | None  # the training process (None when it could not be read)
    server: str  # the server in servers.yaml
    launch: str  # id of the run.launched it follows


class RunEndedData(TypedDict):
    """`run.finished` (exit code 0, or none for a run added with `watch --pid/--match`: it ended, its exit
    code unknowable) and `run.failed`."""

    exit_code: int | None  # None: the process vanished without an exit file
    by: NotRequired[str]  # agent@HOST when the agent saw it
    attempt: NotRequired[int]  # which launch of the experiment: 1, then 2 after the first automatic resume, ...
    launch: NotRequired[int]  # seq of the run.launched that ended (a relaunch may already be recorded)
    log_tail: NotRequired[list[str]]  # last log lines, secrets masked (failures only)
    reason: NotRequired[str]


# -- what the agent observes ----------------------------------------------------------------------


class MetricData(TypedDict, total=False):
    """Known keys only: every other key is a metric, its canonical name -> a number (NaN/Inf kept)."""

    step: int  # the training step
    epoch: float  # the epoch


class GpuProcessData(TypedDict):
    pid: int
    name: str  # its command name (/proc/PID/comm); '' where the agent cannot read it (it ended, or is hidden)


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
    power_limit_w: float  # the enforced power limit
    clock_mhz: float  # SM clock now
    clock_max_mhz: float  # SM clock at most: clock_mhz well under it while throttled is a slowdown
    throttle: list[str]
    ecc_corrected: int
    ecc_uncorrected: int
    mapped: str  # process: the run's processes are on it; config: the run's `gpus` say so
    others: list[GpuProcessData]  # compute processes on it that are not the run's (another job sharing the GPU)


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
    waiting: str  # the kernel function the run's busiest process sleeps in (/proc/PID/wchan): futex_do_wait, ...
    check: str  # wandb_mode
    ok: bool
    wandb_mode: str
    variable: str
    process: str
    reason: str


class LogLineData(TypedDict):
    tag: str  # a tag of events/logtags.py: oom, nccl, illegal_memory, nan, killed, loss_scale, traceback, ...
    line: str  # secrets masked
    lines: NotRequired[int]  # a traceback grouped into one event: how many lines


class PhaseData(TypedDict):
    phase: str  # eval or save (agent/phases.py); a training step after it ends it
    started: bool  # False: the line says the save finished
    line: str  # the framework's own line, secrets masked


class AgentHeartbeatData(TypedDict):
    interval_s: float
    versions: dict[str, str | None]
    gpu: dict[str, Any]
    sources: dict[str, Any]
    spool: dict[str, Any]
    runs_watched: int
    source_errors: NotRequired[int]  # lines or sources that failed since the agent started (each skipped alone)
    last_source_error: NotRequired[str | None]  # where and what, of the latest
    values_refused: NotRequired[int]  # metric values left out (`step: -1`, a numeral that overflows)


class SourceStatusData(TypedDict):
    source: str  # metrics: the run's data source; nvml: GPU sampling; reading: whether its metrics are read
    status: str  # sidecar | wandb_ok | log_fallback | log | unreachable; unavailable (nvml); unreadable | readable
    reason: str
    previous: NotRequired[str | None]
    url: NotRequired[str | None]
    lines: NotRequired[int]  # reading: the log's lines seen without a training metric (progress bars not counted)
    sample: NotRequired[str]  # reading, unreadable: one of those lines, secrets masked, cut to 120 characters


class DumpGpu(TypedDict):
    gpu: int
    util: float | None  # % of time a kernel ran
    mem_used_mb: float | None
    mem_total_mb: float | None


class ProcessDumpData(TypedDict):
    """Where a stalled run is stuck, recorded by its agent at the workers' request (agent/dumper.py)."""

    anomaly: str  # id of the stall's anomaly.opened
    rule: str
    method: str  # py-spy (Python stacks) | proc (/proc: kernel stack, wchan, thread states) | none
    verdict: str  # hang (no CPU, no GPU work) | slow (busy: a slow phase) | unknown
    processes: int  # processes dumped
    cpu_pct: float | None  # the processes' CPU now (100 = one core), measured over the dump
    gpus: list[DumpGpu]  # the run's GPUs (NVML), empty without
    gpu_pct: float | None  # the busiest of them
    text: str  # the dump, secrets masked, capped
    where: NotRequired[str]  # what it waits in: torch.distributed.all_reduce, lock.acquire, _next_data
    category: NotRequired[str]  # collective | dataloader | lock | io | other
    place: NotRequired[str]  # function, file:line of that frame
    pid: NotRequired[int]
    rank: NotRequired[int | None]  # its RANK, when set
    absent: NotRequired[list[str]]  # a collective: the ranks not in it (the ones the others wait for)
    since: NotRequired[float]  # the last step (unix time)
    stalled_s: NotRequired[float]  # since then, when dumped
    cpu_s_since_step: NotRequired[float]  # CPU seconds the processes used since the last step
    truncated: NotRequired[bool]  # the text was cut
    errors: NotRequired[list[str]]  # why a process has no Python stack (py-spy's reason)


# -- what the workers decide and do ---------------------------------------------------------------


class DecisionData(TypedDict):
    decision: str  # STOP | WAIT | CONTINUE
    rule: str | None
    reason: str
    trigger: str  # id of the event that caused it
    policy: str  # hash of the policy that decided
    values: NotRequired[dict[str, Any]]  # the offending values
    severity: NotRequired[str]  # info | warning | critical
    remedy: NotRequired[str | None]  # what to do, from the policy
    anomaly: NotRequired[str | None]  # id of the event that opened the rule's anomaly
    confirm_s: NotRequired[float]  # a guarded STOP: a person has this long to keep it running
    run_host: NotRequired[str]  # the host the run is on


class AnomalyOpenedData(TypedDict):
    rule: str  # the rule's id in the policy
    severity: str
    reason: str
    values: dict[str, Any]  # the offending values (metric name -> value, step)
    remedy: str | None  # what to do about it, from the policy
    decision: str | None  # what the rule asks for (STOP, WAIT) or None
    trigger: str  # id of the event that made it open
    policy: str  # hash of the policy
    run_host: NotRequired[str]  # the host the run is on
    shadow: NotRequired[bool]  # the rule is in shadow mode: its decision is only recorded (decision.shadow)


class AnomalyChartedData(TypedDict):
    """A critical anomaly's chart, kept in Redis under the anomaly's id (events/packfiles.py) for the bot."""

    anomaly: str  # id of the anomaly.opened event
    rule: str
    severity: str  # the anomaly's (critical): where the bot routes the upload
    reason: str
    metric: str  # the plotted metric
    files: list[str]  # the names kept (chart.png)
    run_host: str  # the host the run is on


class DecisionShadowData(TypedDict):
    decision: str  # STOP | WAIT: what the rule would have asked for
    rule: str
    reason: str
    trigger: str  # id of the event that caused it
    policy: str  # hash of the policy
    values: NotRequired[dict[str, Any]]  # the offending values
    severity: NotRequired[str]  # info | warning | critical
    remedy: NotRequired[str | None]  # what to do, from the policy
    anomaly: NotRequired[str | None]  # id of the event that opened the rule's anomaly
    run_host: NotRequired[str]  # the host the run is on


class AnomalyResolvedData(TypedDict):
    rule: str
    reason: str  # cleared, what the kind says of how it ended (a stall: how long), or rule removed from the policy
    opened_by: str | None  # id of the event that opened it
    policy: str  # hash of the policy
    trigger: NotRequired[str]  # absent when the rule left the policy
    run_host: NotRequired[str]
    shadow: NotRequired[bool]  # the rule is in shadow mode


class EvidenceBuiltData(TypedDict):
    decision: str  # id of the STOP decision
    rule: str | None
    path: str  # the pack's directory
    files: list[str]  # the pack's files
    findings: str | None  # the findings file a note was appended to
    summary: str  # the FINAL_SUMMARY line
    run_host: str  # the host the run is on


class EvidenceFailedData(TypedDict):
    """Evidence is best effort: a STOP never waits on it. What could not be written, and why."""

    decision: str  # id of the STOP decision
    rule: str | None
    path: str  # the first path that could not be written (the pack's directory or the findings file)
    error: str  # that OS error, e.g. "[Errno 13] Permission denied: '/app/evidence'"
    problems: list[str]  # every failure, "PATH: ERROR" (the pack and the findings note are tried separately)
    pack: str | None  # the pack's directory when it was written after all (only the findings note failed)
    findings: str | None  # the findings file when its note was appended
    summary: str  # the FINAL_SUMMARY line (also logged by the worker)
    run_host: str  # the host the run is on


class StopRequestedData(TypedDict, total=False):
    by: str  # policy | slack | cli | mcp
    user: str  # who asked (Slack user, the login name for the CLI, mcp:<identity> for an agent over MCP)
    rule: str | None  # the rule behind it, if any
    reason: str
    decision: str | None  # id of the decision it carries out; None for a /stop or a CLI stop tied to none
    run_host: str


class StopResultData(TypedDict):
    """`stop.done` (with `detail`) and `stop.failed` (with `error` and `hint`)."""

    request: str  # id of the stop.requested carried out
    method: str  # stop_command | ctrl-c | tmux kill-session | none
    session: str | None  # the run's tmux session
    run_host: str  # the host the run is on
    reason: str | None  # the request's reason
    detail: NotRequired[str]
    error: NotRequired[str]  # why it failed
    hint: NotRequired[str]  # the command to stop it by hand, when there is one
    by: NotRequired[str]  # who asked: policy | slack | cli | mcp


class ResumeSkippedData(TypedDict):
    reason: str  # why it was not relaunched
    failure: str  # id of the run.failed
    fix: NotRequired[str]  # what a person does about it (older workers wrote none)
    attempts: NotRequired[int]  # the launches so far (the last one failed)


class TickData(TypedDict):
    due: float  # the scheduled time (a ts) it stands for


class PolicyLoadedData(TypedDict):
    policy: str  # content hash
    name: str
    source: str
    rules: int  # how many rules
    sha256: str | None  # of the text
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

    command: str  # as typed (/tw stop, or an old name: /stop), a button's action; stop or launch over MCP
    user: str  # the Slack user, or mcp:<identity> for an agent over MCP
    channel: str | None  # Slack channel id (None when Slack's request names none, and over MCP)
    via: str  # slash, the button's action id, or mcp
    text: str  # the command's text, secrets masked


class SnoozeSetData(TypedDict, total=False):
    by: str  # slack
    rule: str | None  # None: every rule
    until: float
    user: str  # the Slack user
    seconds: float  # /snooze's duration
    decision: str  # the guarded STOP (Keep running)


class StopCancelledData(TypedDict):
    by: str  # slack
    user: str  # the Slack user
    rule: str  # the rule whose STOP was kept running
    until: float
    decision: str  # id of the guarded STOP decision kept running


class LaunchFailedData(TypedDict):
    by: str  # slack | mcp
    server: str
    user: str  # the Slack user, or mcp:<identity> for an agent over MCP
    error: str  # why the launch failed


class NotificationData(TypedDict):
    """`notification.intent` (with `at`) and `notification.sent` (with `ts`, `reconciled`)."""

    key: str  # the notice's key (the event it is about): one message per key
    channel: str  # Slack channel id
    thread_ts: str | None  # the thread it is posted in, None for a new thread
    text: str  # the message text
    at: NotRequired[float]  # when the post was attempted
    ts: NotRequired[str | None]  # the posted message's Slack ts
    reconciled: NotRequired[bool]  # found already posted after a crash


class NotificationFailedData(TypedDict):
    """`notification.failed`: Slack refused the message; after a refused `plain` attempt it is given up."""

    key: str  # the notice's key (the event it is about)
    channel: str  # Slack channel id
    thread_ts: str | None  # the thread it was posted in
    text: str  # the message text
    error: str  # Slack's error code (invalid_blocks, msg_too_long, ...)
    attempt: str  # full (text and blocks) | plain (the text alone, cut to fit)


class WatchdogStalledData(TypedDict):
    detail: str  # what is stuck
    since: float  # when it was first seen stuck


class WatchdogRecoveredData(TypedDict):
    detail: str
    stalled_s: float  # how long it was stuck


class ComponentSilentData(TypedDict):
    component: str  # role@host
    role: str  # agent | dispatcher | worker | notifier
    host: str
    pid: int  # of the process that beat last
    last_beat: float  # time of its last heartbeat
    silent_s: float  # how long it had been quiet when noticed
    last_error: str | None  # the last error it reported


class ComponentRecoveredData(TypedDict):
    component: str
    role: str
    host: str
    pid: int  # of the process beating now (a restart changes it)
    silent_s: float  # from its last beat before the silence to its first one after


# -- remote runs: preflight, plans, checkpoints ---------------------------------------------------


class PreflightData(TypedDict):
    experiment: str
    server: str
    check: str  # the check's name
    ok: bool
    detail: str  # what it found
    remedy: str | None  # how to fix a failed check


class LaunchRefusedData(TypedDict):
    experiment: str
    server: str
    check: str  # the check that failed: a preflight check, wandb_guard, or plan (a plan holds it back)
    reason: str


class PlanStartedData(TypedDict):
    plan: str
    experiments: list[str]
    depends_on: dict[str, list[str]]  # experiment -> the experiments it waits for
    source: str  # the plan's file


class PlanStepData(TypedDict):
    plan: str
    experiment: str
    state: str  # launching | running | refused | finished | failed | stopped | blocked
    reason: NotRequired[str]
    gpus: NotRequired[list[int]]
    at: NotRequired[float]  # when the launch began
    server: NotRequired[str]
    launch_seq: NotRequired[int]  # seq of its run.launched


class PlanFinishedData(TypedDict):
    plan: str
    experiments: dict[str, str]  # experiment -> its final state


class CheckpointSavedData(TypedDict, total=False):
    path: str
    metric: float  # the value of the experiment's best_metric


class CheckpointDeletedData(TypedDict):
    path: str  # the deleted file
    server: str
    reason: str  # why retention let it go

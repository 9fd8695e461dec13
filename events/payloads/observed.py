"""What the agent observes: metrics, GPUs, health, log lines, its own heartbeat.
Each payload class, then its type's one declaration (events/registry.py).

No `from __future__ import annotations`: Python 3.11 reads `NotRequired` from evaluated annotations only.
"""

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from trainwarden.core.dumps import stuck_text
from trainwarden.core.words import fmt, said
from trainwarden.events.registry import declare

if TYPE_CHECKING:
    from trainwarden.events.envelope import Event


class MetricData(TypedDict, total=False):
    """Known keys only: every other key is a metric, its canonical name -> a number (NaN/Inf kept)."""

    step: int  # the training step
    epoch: float  # the epoch


def _metric(event: "Event") -> str:
    return fmt_metrics(event.data)


def fmt_metrics(data: dict[str, Any]) -> str:
    """`step=5 loss=2.5 lr=0.001`: the step first, then the metrics by name."""
    keys = sorted(data, key=lambda k: (k != "step", k))
    return " ".join(f"{k}={fmt(data[k])}" for k in keys)


declare(
    "metric",
    MetricData,
    meaning="training metrics from one log line or one W&B history row",
    emitted_by="agent (agent/logsource.py, agent/watcher.py, agent/wandb_source.py)",
    more="every other key: a metric under its canonical name, a number (NaN and Inf kept)",
    describe=_metric,
    activity=True,
)


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


declare(
    "gpu",
    GpuData,
    meaning="one GPU's sample (NVML) for a run using it",
    emitted_by="agent (agent/runner.py)",
    activity=True,
)


class GpuXidData(TypedDict):
    gpu: int
    uuid: str
    xid: int
    meaning: str
    severity: str  # critical | error | warning
    mapped: bool  # False: on a GPU no run is known to use (sent to every run)


declare(
    "gpu.xid",
    GpuXidData,
    meaning="an NVIDIA XID error on a GPU the run uses (or on an unclaimed GPU)",
    emitted_by="agent (agent/runner.py)",
    activity=True,
)


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


declare(
    "health",
    HealthData,
    meaning="the run's processes (alive, memory, CPU), or a guard finding such as W&B kept offline",
    emitted_by="agent (agent/watcher.py)",
    activity=True,
)


class LogLineData(TypedDict):
    tag: str  # a tag of faults/logtags.py: oom, nccl, illegal_memory, nan, killed, loss_scale, traceback, ...
    line: str  # secrets masked
    lines: NotRequired[int]  # a traceback grouped into one event: how many lines


def _log_line(event: "Event") -> str:
    line = cast(LogLineData, event.data)
    return f"[{said(line.get('tag'), 'line')}] {said(line.get('line'), '')}"


declare(
    "log.line",
    LogLineData,
    meaning="a notable log line (an error, OOM, NCCL failure; a traceback grouped into one)",
    emitted_by="agent (agent/logsource.py)",
    describe=_log_line,
    activity=True,
)


class PhaseData(TypedDict):
    phase: str  # eval or save (agent/phases.py); a training step after it ends it
    started: bool  # False: the line says the save finished
    line: str  # the framework's own line, secrets masked


declare(
    "phase",
    PhaseData,
    meaning="the log says an eval or a checkpoint save began, or a save ended (the frameworks' own lines); the stall "
    "rule judges a silence by its phase",
    emitted_by="agent (agent/phases.py, agent/logsource.py)",
    activity=True,
)


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


declare(
    "agent.heartbeat",
    AgentHeartbeatData,
    meaning="the agent is alive: its versions, GPU access, the run's sources and its spool",
    emitted_by="agent (agent/runner.py, agent/heartbeat.py)",
)


class SourceStatusData(TypedDict):
    source: str  # metrics: its data source; nvml: GPU sampling; reading: its metrics read?; log: the log readable?
    status: str  # sidecar | wandb_ok | log_fallback | log | unreachable; unavailable (nvml); unreadable | readable; ok
    reason: str
    previous: NotRequired[str | None]
    url: NotRequired[str | None]
    lines: NotRequired[int]  # reading: the log's lines seen without a training metric (progress bars not counted)
    sample: NotRequired[str]  # reading, unreadable: one of those lines, secrets masked, cut to 120 characters


declare(
    "source.status",
    SourceStatusData,
    meaning="a data source changed status (W&B ok, log fallback, unreachable; NVML unavailable; the log read blind)",
    emitted_by="agent (agent/watcher.py, agent/runner.py)",
)


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


def _dump(event: "Event") -> str:
    """Its text: stacks.txt in the latest pack, or the event itself."""
    d = event.data
    return f"{stuck_text(d)} ({said(d.get('method'))}, {said(d.get('processes'))} processes)"


declare(
    "process.dump",
    ProcessDumpData,
    meaning="where a stalled run is stuck: its processes' Python stacks (py-spy) or /proc state, CPU and GPU, "
    "a verdict",
    emitted_by="agent, asked by the workers when a stall anomaly opens (agent/dumper.py, workers/dump_request.py)",
    describe=_dump,
)

"""Every event type: its name (the constant in events/types.py), its payload (a TypedDict in
events/payloads.py), what it means and who emits it, in one place.

`python -m trainwarden.events.catalogue` prints docs/events.md (a unit test checks the committed
file is current). A type missing from here is still kept, stored and shown as "unknown": the
catalogue documents and types the payloads, it does not filter the log.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import types as pytypes
import typing
from dataclasses import dataclass
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.limits import field_problem

RUN = "a run's log"
SYSTEM = f"`{t.SYSTEM_RUN}`"
PLAN = "the plan's stream"


@dataclass(frozen=True, slots=True)
class EventType:
    name: str
    payload: Any  # a TypedDict class from events/payloads.py
    meaning: str
    emitted_by: str  # process (module)
    log: str = RUN  # where it is appended
    more: str = ""  # keys beyond the typed ones (a metric's values)


CATALOGUE: tuple[EventType, ...] = (
    # -- a run's life
    EventType(
        t.RUN_LAUNCHED,
        p.RunLaunchedData,
        "a run was started in tmux, locally or on a server; a relaunch starts a new launch (its seq identifies it)",
        "CLI, bot, planner, workers' resume (remote/launch.py, remote/local_launch.py)",
    ),
    EventType(
        t.RUN_WATCHED,
        p.RunWatchedData,
        "an agent watches a run it did not launch (`trainwarden watch`, settings, --watch): how to stop it",
        "agent (agent/runner.py)",
    ),
    EventType(
        t.RUN_STARTED, p.RunStartedData, "the launched run's process is up (its pid)", "the launcher (remote/launch.py)"
    ),
    EventType(
        t.RUN_FINISHED,
        p.RunEndedData,
        "the run's process exited with code 0 (or, added with `watch --pid/--match`, ended: its code unknowable)",
        "agent (agent/watcher.py), planner's liveness check (remote/liveness.py)",
    ),
    EventType(
        t.RUN_FAILED,
        p.RunEndedData,
        "the run's process exited with a non-zero code, or vanished",
        "agent (agent/watcher.py), planner's liveness check (remote/liveness.py)",
    ),
    # -- what the agent observes
    EventType(
        t.METRIC,
        p.MetricData,
        "training metrics from one log line or one W&B history row",
        "agent (agent/logsource.py, agent/watcher.py, agent/wandb_source.py)",
        more="every other key: a metric under its canonical name, a number (NaN and Inf kept)",
    ),
    EventType(t.GPU, p.GpuData, "one GPU's sample (NVML) for a run using it", "agent (agent/runner.py)"),
    EventType(
        t.GPU_XID,
        p.GpuXidData,
        "an NVIDIA XID error on a GPU the run uses (or on an unclaimed GPU)",
        "agent (agent/runner.py)",
    ),
    EventType(
        t.HEALTH,
        p.HealthData,
        "the run's processes (alive, memory, CPU), or a guard finding such as W&B kept offline",
        "agent (agent/watcher.py)",
    ),
    EventType(
        t.PROCESS_DUMP,
        p.ProcessDumpData,
        "where a stalled run is stuck: its processes' Python stacks (py-spy) or /proc state, CPU and GPU, a verdict",
        "agent, asked by the workers when a stall anomaly opens (agent/dumper.py, workers/dump_request.py)",
    ),
    EventType(
        t.LOG_LINE,
        p.LogLineData,
        "a notable log line (an error, OOM, NCCL failure; a traceback grouped into one)",
        "agent (agent/logsource.py)",
    ),
    EventType(
        t.PHASE,
        p.PhaseData,
        "the log says an eval or a checkpoint save began, or a save ended (the frameworks' own lines); the stall "
        "rule judges a silence by its phase",
        "agent (agent/phases.py, agent/logsource.py)",
    ),
    EventType(
        t.AGENT_HEARTBEAT,
        p.AgentHeartbeatData,
        "the agent is alive: its versions, GPU access, the run's sources and its spool",
        "agent (agent/runner.py, agent/heartbeat.py)",
    ),
    EventType(
        t.SOURCE_STATUS,
        p.SourceStatusData,
        "a data source changed status (W&B ok, log fallback, unreachable; NVML unavailable; the log read blind)",
        "agent (agent/watcher.py, agent/runner.py)",
    ),
    # -- what the workers decide and do
    EventType(
        t.TICK,
        p.TickData,
        "a scheduled evaluation of a quiet run, so time-driven rules fire",
        "dispatcher (workers/schedule.py)",
    ),
    EventType(
        t.DECISION,
        p.DecisionData,
        "the run's decision changed (STOP, WAIT or CONTINUE) and why",
        "worker (policies/engine.py via workers/evaluate.py)",
    ),
    EventType(
        t.DECISION_SHADOW,
        p.DecisionShadowData,
        "a rule in shadow mode would have asked for STOP or WAIT; recorded and posted, never acted on",
        "worker (policies/engine.py via workers/evaluate.py)",
    ),
    EventType(
        t.ANOMALY_OPENED,
        p.AnomalyOpenedData,
        "a rule's condition persisted long enough: it is open",
        "worker (policies/engine.py)",
    ),
    EventType(
        t.ANOMALY_RESOLVED,
        p.AnomalyResolvedData,
        "an open rule's condition cleared, or the rule left the policy",
        "worker (policies/engine.py)",
    ),
    EventType(
        t.ANOMALY_CHARTED,
        p.AnomalyChartedData,
        "the chart of a critical anomaly's metric was drawn and kept for Slack (not when a STOP's pack covers it)",
        "worker (workers/actions.py)",
    ),
    EventType(
        t.EVIDENCE_BUILT,
        p.EvidenceBuiltData,
        "the evidence pack of a STOP decision was written",
        "worker (workers/actions.py)",
    ),
    EventType(
        t.EVIDENCE_FAILED,
        p.EvidenceFailedData,
        "the evidence pack or the findings note of a STOP decision could not be written; the stop went on",
        "worker (workers/actions.py)",
    ),
    EventType(
        t.STOP_REQUESTED,
        p.StopRequestedData,
        "someone asked for the run to be stopped: the policy, a person in Slack, `trainwarden stop`, or an agent "
        "over MCP",
        "worker (workers/evaluate.py), bot (bot/handlers.py), CLI (trainwarden/run_commands.py), `trainwarden mcp`",
    ),
    EventType(
        t.STOP_DONE,
        p.StopResultData,
        "the run was stopped",
        "worker (workers/actions.py), or the run host's agent for a watched run (agent/stopper.py)",
    ),
    EventType(
        t.STOP_FAILED,
        p.StopResultData,
        "stopping the run failed, and why",
        "worker (workers/actions.py), or the run host's agent for a watched run (agent/stopper.py)",
    ),
    EventType(
        t.RESUME_SKIPPED,
        p.ResumeSkippedData,
        "a failed resumable run was not relaunched: why, and the fix (posted as NOT RESUMED)",
        "worker (workers/actions.py)",
    ),
    EventType(
        t.POLICY_LOADED,
        p.PolicyLoadedData,
        "a policy came into force: its text and content hash",
        "worker (workers/policy_source.py)",
        log=SYSTEM,
    ),
    EventType(
        t.POLICY_REJECTED,
        p.PolicyRejectedData,
        "a changed policy file failed validation; the last good policy stays",
        "worker (workers/policy_source.py)",
        log=SYSTEM,
    ),
    EventType(
        t.POLICY_APPLIED,
        p.PolicyAppliedData,
        "from which stream entry on (`from`) a policy evaluates the run (for replay --verify)",
        "worker (policies/engine.py via workers/evaluate.py)",
    ),
    # -- people, Slack, the watchdog
    EventType(
        t.COMMAND_RECEIVED,
        p.CommandData,
        "a Slack command or button press, or an MCP action (stop, launch), for the audit trail",
        "bot (bot/authz.py); `trainwarden mcp` (trainwarden/mcp_server/actions.py)",
        log=f"the target run's log, else {SYSTEM}",
    ),
    EventType(
        t.COMMAND_DENIED,
        p.CommandData,
        "a Slack command refused by the allow-lists, or an MCP action mcp.allow_actions does not allow",
        "bot (bot/authz.py); `trainwarden mcp` (trainwarden/mcp_server/actions.py)",
        log=f"the target run's log, else {SYSTEM}",
    ),
    EventType(
        t.SNOOZE_SET,
        p.SnoozeSetData,
        "notifications of a rule (or all) are muted until `until`",
        "bot (bot/handlers.py)",
    ),
    EventType(
        t.STOP_CANCELLED,
        p.StopCancelledData,
        "a person chose Keep running on a guarded STOP: the rule may not stop the run until `until`",
        "bot (bot/handlers.py)",
    ),
    EventType(
        t.LAUNCH_FAILED,
        p.LaunchFailedData,
        "a /launch from Slack, or a launch by an agent over MCP, was refused or failed",
        "bot (bot/handlers.py); `trainwarden mcp` (trainwarden/mcp_server/actions.py)",
    ),
    EventType(
        t.NOTIFICATION_INTENT,
        p.NotificationData,
        "a Slack message is about to be posted (exactly-once delivery: the intent comes first)",
        "bot (bot/delivery.py)",
    ),
    EventType(
        t.NOTIFICATION_SENT,
        p.NotificationData,
        "a Slack message was posted (or found already posted)",
        "bot (bot/delivery.py)",
    ),
    EventType(
        t.NOTIFICATION_FAILED,
        p.NotificationFailedData,
        "Slack refused a message (`error`); it is sent once more as plain text (`attempt` says which was refused)",
        "bot (bot/delivery.py)",
    ),
    EventType(
        t.WATCHDOG_STALLED,
        p.WatchdogStalledData,
        "the bot's dead-man's switch: trainwarden stopped making progress",
        "bot (bot/deadman.py)",
        log=SYSTEM,
    ),
    EventType(
        t.WATCHDOG_RECOVERED,
        p.WatchdogRecoveredData,
        "progress again after a stall",
        "bot (bot/deadman.py)",
        log=SYSTEM,
    ),
    EventType(
        t.COMPONENT_SILENT,
        p.ComponentSilentData,
        "a daemon (agent, dispatcher, worker, notifier) sent no heartbeat for 3 of its intervals",
        "dispatcher, worker or notifier, whichever notices first (events/silence.py)",
        log=SYSTEM,
    ),
    EventType(
        t.COMPONENT_RECOVERED,
        p.ComponentRecoveredData,
        "a silent daemon sends heartbeats again",
        "dispatcher, worker or notifier, whichever notices first (events/silence.py)",
        log=SYSTEM,
    ),
    # -- remote runs
    EventType(
        t.PREFLIGHT,
        p.PreflightData,
        "one preflight check of an experiment on a server",
        "the launcher (remote/launch.py)",
    ),
    EventType(
        t.LAUNCH_REFUSED,
        p.LaunchRefusedData,
        "a launch was refused by a preflight check",
        "the launcher (remote/launch.py)",
    ),
    EventType(
        t.PLAN_STARTED,
        p.PlanStartedData,
        "a plan (experiments with dependencies) began",
        "planner (remote/planner.py)",
        log=PLAN,
    ),
    EventType(
        t.PLAN_STEP, p.PlanStepData, "one experiment of a plan changed state", "planner (remote/planner.py)", log=PLAN
    ),
    EventType(
        t.PLAN_FINISHED,
        p.PlanFinishedData,
        "every experiment of a plan is done: how each ended",
        "planner (remote/planner.py)",
        log=PLAN,
    ),
    EventType(
        t.CHECKPOINT_SAVED,
        p.CheckpointSavedData,
        "the training code saved a checkpoint (its metric ranks it for retention)",
        "the training code itself; read by `trainwarden checkpoints`, `collect`",
    ),
    EventType(
        t.CHECKPOINT_DELETED,
        p.CheckpointDeletedData,
        "checkpoint retention deleted a file",
        "CLI (`trainwarden checkpoints --apply`, trainwarden/cli_remote.py)",
    ),
)

BY_NAME: dict[str, EventType] = {e.name: e for e in CATALOGUE}


def fields(payload: Any) -> list[tuple[str, str, bool]]:
    """(key, type, required) of a payload TypedDict, in declaration order."""
    hints = get_type_hints(payload, include_extras=False)
    required: frozenset[str] = payload.__required_keys__
    return [(key, type_name(hint), key in required) for key, hint in hints.items()]


@functools.cache
def _hints(event_type: str) -> tuple[dict[str, Any], frozenset[str]] | None:
    spec = BY_NAME.get(event_type)
    return None if spec is None else (get_type_hints(spec.payload), spec.payload.__required_keys__)


def problems(event_type: str, data: dict[str, Any], *, missing: bool = True) -> list[str]:
    """How `data` departs from its type's payload: fields of the wrong type (checked one level deep), and
    with `missing`, required fields left out. [] for a conforming payload and for an unknown type. The
    codec refuses an entry with a field of the wrong type (events/codec.py): nothing malformed reaches a
    projection, a stop target or a message. A field left out is no refusal there (an older version's log
    replays; readers `.get` every field); the tests of producers check both."""
    found = _hints(event_type)
    if found is None:
        return []
    hints, required = found
    out = [f"{event_type}: missing {key!r}" for key in sorted(required - data.keys())] if missing else []
    for key, value in data.items():
        if key in hints and not _conforms(value, hints[key]):
            out.append(f"{event_type}: {key}={value!r:.80} is not {type_name(hints[key])}")
        elif (too_long := field_problem(key, value)) is not None:
            out.append(f"{event_type}: {too_long}")
    return out


def _conforms(value: Any, hint: Any) -> bool:
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    origin = get_origin(hint)
    if origin in (pytypes.UnionType, typing.Union):
        return any(_conforms(value, arg) for arg in get_args(hint))
    if isinstance(hint, type) and is_typeddict(hint):
        return isinstance(value, dict)
    if hint is float:
        return type(value) in (float, int)  # JSON writes 2.0 as 2.0 but a producer may hand over an int
    if hint is int:
        return type(value) is int
    return isinstance(value, origin or hint)


def type_name(hint: Any) -> str:
    if hint is type(None):
        return "None"
    if hint is Any:
        return "any"
    if isinstance(hint, type) and is_typeddict(hint):
        return "{" + ", ".join(f"{k}: {v}" for k, v, _ in fields(hint)) + "}"
    origin, args = get_origin(hint), get_args(hint)
    if origin in (pytypes.UnionType, typing.Union):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(type_name(a) for a in args)}]"
    return str(hint.__name__)


def render() -> str:
    """docs/events.md."""
    lines = [
        "# Event types",
        "",
        "<!-- Generated by `python -m trainwarden.events.catalogue > docs/events.md` from events/catalogue.py",
        "     and events/payloads.py; a unit test checks this file is current. Do not edit by hand. -->",
        "",
        "Every event is an envelope (`id`, `type`, `run`, `host`, `ts`, `seq`, `data`, `v`; see",
        "events/envelope.py); the table of each type below is its `data`. Every read checks an entry of a",
        "listed type against it: a field of another type (a session that is a number, a reason that is a",
        "list) and the entry is dead-lettered with that reason, as is a full-form entry naming another run",
        "than its stream's; nothing malformed reaches a projection, a stop target or a message. Producers",
        "of this version write the required fields; a field left out is read as absent (a log of another",
        "version replays). A type not listed here is kept, stored and shown (as unknown) by replay.",
        "",
        "| type | meaning |",
        "|---|---|",
    ]
    lines += [f"| [`{e.name}`](#{e.name.replace('.', '')}) | {e.meaning} |" for e in CATALOGUE]
    for e in CATALOGUE:
        lines += ["", f"## {e.name}", "", f"{e.meaning[0].upper()}{e.meaning[1:]}.", ""]
        lines += [f"- emitted by: {e.emitted_by}", f"- appended to: {e.log}", f"- payload: `{e.payload.__name__}`"]
        notes = field_notes(e.payload)
        lines += ["", "| field | type | always | what |", "|---|---|---|---|"]
        lines += [f"| `{key}` | `{_cell(typ)}` | {'yes' if req else 'no'} | {_cell(notes.get(key, ''))} |"
                  for key, typ, req in fields(e.payload)]  # fmt: skip
        if e.more:
            lines.append(f"| *other keys* | number | no | {e.more} |")
    return "\n".join(lines) + "\n"


_NOTE = re.compile(r"^\s+(\w+): .*?  # (.+)$")


def field_notes(payload: Any) -> dict[str, str]:
    """The comment on each field's line in events/payloads.py: one source for the code and the docs."""
    try:
        source = inspect.getsource(payload)
    except (OSError, TypeError):  # a TypedDict made by a call has no class body
        return {}
    return {m[1]: m[2] for line in source.splitlines() if (m := _NOTE.match(line))}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # a bare | ends a table cell, even inside backticks


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

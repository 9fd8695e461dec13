"""What the workers decide and do: decisions, anomalies, evidence, stops, policies.
Each payload class, then its type's one declaration (events/registry.py).

No `from __future__ import annotations`: Python 3.11 reads `NotRequired` from evaluated annotations only.
"""

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from trainwarden.core.words import said
from trainwarden.events.registry import SYSTEM, declare

if TYPE_CHECKING:
    from trainwarden.events.envelope import Event


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


def _decision(event: "Event") -> str:
    decided = cast(DecisionData, event.data)
    rule = f" by {decided['rule']}" if decided.get("rule") else ""
    policy = f" [policy {decided['policy']}]" if decided.get("policy") else ""
    return f"{said(decided.get('decision'))}{rule}: {said(decided.get('reason'), 'no reason recorded')}{policy}"


declare(
    "decision",
    DecisionData,
    meaning="the run's decision changed (STOP, WAIT or CONTINUE) and why",
    emitted_by="worker (policies/engine.py via workers/evaluate.py)",
    describe=_decision,
)


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


def _opened(event: "Event") -> str:
    opened = cast(AnomalyOpenedData, event.data)
    mark = " [shadow]" if opened.get("shadow") else ""
    severity = f" ({opened['severity']})" if opened.get("severity") else ""
    return f"{said(opened.get('rule'), 'a rule')}{severity}{mark}: {said(opened.get('reason'), 'no reason recorded')}"


declare(
    "anomaly.opened",
    AnomalyOpenedData,
    meaning="a rule's condition persisted long enough: it is open",
    emitted_by="worker (policies/engine.py)",
    worker_output=True,
    describe=_opened,
)


class AnomalyChartedData(TypedDict):
    """A critical anomaly's chart, kept in Redis under the anomaly's id (events/packfiles.py) for the bot."""

    anomaly: str  # id of the anomaly.opened event
    rule: str
    severity: str  # the anomaly's (critical): where the bot routes the upload
    reason: str
    metric: str  # the plotted metric
    files: list[str]  # the names kept (chart.png)
    run_host: str  # the host the run is on


declare(
    "anomaly.charted",
    AnomalyChartedData,
    meaning="the chart of a critical anomaly's metric was drawn and kept for Slack (not when a STOP's pack covers it)",
    emitted_by="worker (workers/actions.py)",
    worker_output=True,
)


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


def _shadow(event: "Event") -> str:
    shadow = cast(DecisionShadowData, event.data)
    what = f"would have decided {said(shadow.get('decision'))} by {said(shadow.get('rule'), 'a rule')}"
    return f"{what} (shadow mode): {said(shadow.get('reason'), 'no reason recorded')}"


declare(
    "decision.shadow",
    DecisionShadowData,
    meaning="a rule in shadow mode would have asked for STOP or WAIT; recorded and posted, never acted on",
    emitted_by="worker (policies/engine.py via workers/evaluate.py)",
    worker_output=True,
    describe=_shadow,
)


class AnomalyResolvedData(TypedDict):
    rule: str
    reason: str  # cleared, what the kind says of how it ended (a stall: how long), or rule removed from the policy
    opened_by: str | None  # id of the event that opened it
    policy: str  # hash of the policy
    trigger: NotRequired[str]  # absent when the rule left the policy
    run_host: NotRequired[str]
    shadow: NotRequired[bool]  # the rule is in shadow mode


def _resolved(event: "Event") -> str:
    return f"{said(cast(AnomalyResolvedData, event.data).get('rule'), 'an anomaly')} resolved"


declare(
    "anomaly.resolved",
    AnomalyResolvedData,
    meaning="an open rule's condition cleared, or the rule left the policy",
    emitted_by="worker (policies/engine.py)",
    worker_output=True,
    describe=_resolved,
)


class EvidenceBuiltData(TypedDict):
    decision: str  # id of the STOP decision
    rule: str | None
    path: str  # the pack's directory
    files: list[str]  # the pack's files
    findings: str | None  # the findings file a note was appended to
    summary: str  # the FINAL_SUMMARY line
    run_host: str  # the host the run is on


def _evidence(event: "Event") -> str:
    return said(cast(EvidenceBuiltData, event.data).get("path"), "no path recorded")


declare(
    "evidence.built",
    EvidenceBuiltData,
    meaning="the evidence pack of a STOP decision was written",
    emitted_by="worker (workers/actions.py)",
    worker_output=True,
    describe=_evidence,
)


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


declare(
    "evidence.failed",
    EvidenceFailedData,
    meaning="the evidence pack or the findings note of a STOP decision could not be written; the stop went on",
    emitted_by="worker (workers/actions.py)",
    worker_output=True,
)


class StopRequestedData(TypedDict, total=False):
    by: str  # policy | slack | cli | mcp
    user: str  # who asked (Slack user, the login name for the CLI, mcp:<identity> for an agent over MCP)
    rule: str | None  # the rule behind it, if any
    reason: str
    decision: str | None  # id of the decision it carries out; None for a /stop or a CLI stop tied to none
    run_host: str


def _stop_requested(event: "Event") -> str:
    asked = cast(StopRequestedData, event.data)
    by, user = asked.get("by"), asked.get("user")
    who = f"{by} ({user})" if by and user else by or user or "?"  # who asked, through what: "cli (ana)"
    rule = f" ({asked['rule']})" if asked.get("rule") else ""
    return f"by {who}{rule}: {said(asked.get('reason'), 'no reason given')}"


declare(
    "stop.requested",
    StopRequestedData,
    meaning="someone asked for the run to be stopped: the policy, a person in Slack, `trainwarden stop`, or an agent "
    "over MCP",
    emitted_by="worker (workers/evaluate.py), bot (bot/handlers.py), CLI (trainwarden/cli/run.py), `trainwarden mcp`",
    describe=_stop_requested,
    activity=True,
)


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


def _stop_done(event: "Event") -> str:
    done = cast(StopResultData, event.data)
    return f"{said(done.get('method'), 'stopped')}: {said(done.get('detail'), 'no detail recorded')}"


def _stop_failed(event: "Event") -> str:
    failed = cast(StopResultData, event.data)
    return f"{said(failed.get('method'), 'stop')}: {said(failed.get('error'), 'no error recorded')}"


declare(
    "stop.done",
    StopResultData,
    meaning="the run was stopped",
    emitted_by="worker (workers/actions.py), or the run host's agent for a watched run (agent/stopper.py)",
    worker_output=True,
    describe=_stop_done,
    activity=True,
)

declare(
    "stop.failed",
    StopResultData,
    meaning="stopping the run failed, and why",
    emitted_by="worker (workers/actions.py), or the run host's agent for a watched run (agent/stopper.py)",
    worker_output=True,
    describe=_stop_failed,
    activity=True,
)


class StopHeldData(TypedDict):
    """A policy STOP the breaker held (workers/breaker.py): the run goes on until a person releases or cancels it."""

    request: str  # id of the stop.requested not carried out
    decision: str | None  # id of the STOP decision (the Release and Cancel act on it)
    rule: str | None
    reason: str | None  # the request's reason
    stops: int  # policy STOPs carried out within the window
    max_stops: int
    window_s: float
    run_host: str
    limit: NotRequired[int]  # the limit in force: max_stops, or max_share of the running runs when more
    new_rule_s: NotRequired[float]  # held by the new-rule grace: seconds since the rule was first loaded
    grace_s: NotRequired[float]  # that grace (workers.breaker.new_rule_grace_s)


def _stop_held(event: "Event") -> str:
    held = cast(StopHeldData, event.data)
    rule = said(held.get("rule"), "a rule")
    if isinstance(held.get("new_rule_s"), int | float):
        since = f"{held.get('new_rule_s'):.0f}s"
        return f"{rule}: held by the stop breaker (a new rule, first loaded {since} before, on a healthy run)"
    stops, limit = said(held.get("stops"), "?"), said(held.get("limit", held.get("max_stops")), "?")
    window = f"{held.get('window_s'):g}s" if isinstance(held.get("window_s"), int | float) else "its window"
    return f"{rule}: held by the stop breaker ({stops} of {limit} stops in {window})"


declare(
    "stop.held",
    StopHeldData,
    meaning="the stop breaker held a policy STOP for a person: too many stops lately across runs",
    emitted_by="worker (workers/breaker.py via workers/performers.py)",
    worker_output=True,
    describe=_stop_held,
)


class ResumeSkippedData(TypedDict):
    reason: str  # why it was not relaunched
    failure: str  # id of the run.failed
    fix: NotRequired[str]  # what a person does about it (older workers wrote none)
    attempts: NotRequired[int]  # the launches so far (the last one failed)


def _not_resumed(event: "Event") -> str:
    skipped = cast(ResumeSkippedData, event.data)
    fix = f"; fix: {skipped['fix']}" if skipped.get("fix") else ""
    return f"not resumed: {said(skipped.get('reason'), 'no reason recorded')}{fix}"


declare(
    "resume.skipped",
    ResumeSkippedData,
    meaning="a failed resumable run was not relaunched: why, and the fix (posted as NOT RESUMED)",
    emitted_by="worker (workers/actions.py)",
    worker_output=True,
    describe=_not_resumed,
)


class TickData(TypedDict):
    due: float  # the scheduled time (a ts) it stands for


def _tick(event: "Event") -> str:
    return "scheduled evaluation of a quiet run"


declare(
    "tick",
    TickData,
    meaning="a scheduled evaluation of a quiet run, so time-driven rules fire",
    emitted_by="dispatcher (workers/schedule.py)",
    describe=_tick,
)


class PolicyLoadedData(TypedDict):
    policy: str  # content hash
    name: str
    source: str
    rules: int  # how many rules
    sha256: str | None  # of the text
    text: str | None  # None for a policy built in code: replay --verify then needs --policy
    base: NotRequired[str]  # the text of the policy it `extends` (a replay loads it with that base, not today's)


def _policy_loaded(event: "Event") -> str:
    loaded = cast(PolicyLoadedData, event.data)
    return (
        f"policy {said(loaded.get('name'), '')} {said(loaded.get('policy'))} loaded from "
        f"{said(loaded.get('source'), 'an unrecorded source')} ({said(loaded.get('rules'))} rules)"
    )


declare(
    "policy.loaded",
    PolicyLoadedData,
    meaning="a policy came into force: its text and content hash",
    emitted_by="worker (workers/policy_source.py)",
    log=SYSTEM,
    worker_output=True,
    describe=_policy_loaded,
)


class PolicyRejectedData(TypedDict):
    source: str
    problems: list[str]  # file:line:column: what is wrong
    kept: str  # hash of the policy still in force


def _policy_rejected(event: "Event") -> str:
    rejected = cast(PolicyRejectedData, event.data)
    problems = "; ".join(rejected.get("problems") or ["no problem recorded"])
    return f"policy file {said(rejected.get('source'))} rejected, kept {said(rejected.get('kept'))}: {problems}"


declare(
    "policy.rejected",
    PolicyRejectedData,
    meaning="a changed policy file failed validation; the last good policy stays",
    emitted_by="worker (workers/policy_source.py)",
    log=SYSTEM,
    worker_output=True,
    describe=_policy_rejected,
)


# functional form: "from" (the first stream entry the policy evaluated) is a Python keyword


PolicyAppliedData = TypedDict(
    "PolicyAppliedData",
    {"policy": str, "name": str, "previous": str | None, "from": NotRequired[str], "run_host": NotRequired[str]},
)


def _policy_applied(event: "Event") -> str:
    applied = cast(PolicyAppliedData, event.data)
    name, policy = said(applied.get("name"), ""), said(applied.get("policy"))
    return f"policy {name} {policy} evaluates from entry {said(applied.get('from'))}"


declare(
    "policy.applied",
    PolicyAppliedData,
    meaning="from which stream entry on (`from`) a policy evaluates the run (for replay --verify)",
    emitted_by="worker (policies/engine.py via workers/evaluate.py)",
    worker_output=True,
    describe=_policy_applied,
)

"""Side effects the evaluation asked for: build an evidence pack, stop a run, chart a critical anomaly.

How each kind is carried out is workers/performers.py; these are the actions' bodies. Each action is safe
to repeat. The files are rewritten in place, a second stop of a run already
gone is a no-op success, and the resulting event has a deterministic id
(`act/<run>/<stream id of the request>:1`), so a repeat appends nothing. A run trainwarden did not
launch is stopped by the agent on its host (remote/agent_stop.py), which records the outcome
under that same id: a repeated request is carried out and recorded once.

The agent's stop takes its grace periods (a run that ignores Ctrl-C: up to twice the grace), and no
other run may wait for it: the worker sends the request, keeps the action pending (`Awaiting`: sent
when, answer due by when) and is done with the run; the agent's outcome, appended to the run's log,
brings the run back to a worker, which finds it and settles the action. Only an agent that stays
silent past the deadline gets a `stop.failed` of the worker's own, under the same id.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from rq.timeouts import JobTimeoutException
from trainwarden.core.tmux import tmux_argv
from trainwarden.events import packfiles
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.errors import StoreError
from trainwarden.events.packfiles import CHART, REPORT
from trainwarden.events.payloads import (
    AnomalyChartedData,
    AnomalyOpenedData,
    DecisionData,
    EvidenceBuiltData,
    EvidenceFailedData,
    ResumedAfterData,
    RunEndedData,
    RunWatchedData,
    StopRequestedData,
    StopResultData,
)
from trainwarden.policies.model import CRITICAL
from trainwarden.remote import agent_stop
from trainwarden.remote.errors import LaunchError, PreflightFailed
from trainwarden.remote.fleet import Experiment
from trainwarden.remote.stop import StopTarget
from trainwarden.workers.chart import render_chart
from trainwarden.workers.checkpoint import Checkpoint
from trainwarden.workers.context import WorkerContext
from trainwarden.workers.dump_request import stacks_text
from trainwarden.workers.evidence import Pack, build_pack, log_excerpt, triggering_metric, write_pack
from trainwarden.workers.findings import append_note, findings_note
from trainwarden.workers.pending import Awaiting, StopRun

log = logging.getLogger(__name__)


def action_producer(run: str, sid: str) -> str:
    return f"act/{run}/{sid}"


Evidence = tuple[str, EvidenceBuiltData | EvidenceFailedData]


def build_evidence(ctx: WorkerContext, cp: Checkpoint, decision: Event) -> Evidence:
    """Write the pack (JSON, report, chart), append the findings note, log the FINAL_SUMMARY.

    Best effort: a STOP must never wait on a full disk, a read-only volume or a hung mount. What
    cannot be written is returned as `evidence.failed` (path and OS error) instead of raised, and a
    pack not done within `ctx.evidence_timeout_s` is given up (its thread may finish later, unread),
    so the stop action after this one runs and the STOP message says what is missing."""
    outcome: list[Evidence] = []
    crash: list[BaseException] = []

    def work() -> None:
        try:
            outcome.append(_build_evidence(ctx, cp, decision))
        except BaseException as exc:  # handed to the job's thread, which decides
            crash.append(exc)

    thread = threading.Thread(target=work, name=f"evidence-{decision.run}", daemon=True)
    thread.start()
    thread.join(ctx.evidence_timeout_s)
    if crash:
        raise crash[0]
    if outcome:
        return outcome[0]
    decided = cast(DecisionData, decision.data)
    error = f"not written within {ctx.evidence_timeout_s:g} s (a hung disk or network mount?)"
    log.error("evidence for %s %s; the stop goes on without it", decision.run, error)
    failed: EvidenceFailedData = {
        "decision": decision.id, "rule": decided.get("rule"), "path": str(ctx.evidence_dir), "error": error,
        "problems": [f"{ctx.evidence_dir}: {error}"], "pack": None, "findings": None,
        "summary": f"FINAL_SUMMARY {decision.run}: STOP ({decided.get('reason')}); evidence {error}",
        "run_host": cp.run.host,
    }  # fmt: skip
    return t.EVIDENCE_FAILED, failed


def _build_evidence(ctx: WorkerContext, cp: Checkpoint, decision: Event) -> Evidence:
    log_path = cp.run.launch.get("log_path")
    recent = list(cp.run.recent_metrics)
    decided = cast(DecisionData, decision.data)
    values = decided.get("values") or {}
    step = values.get("step")
    metric = triggering_metric(values, recent)
    words = (metric, str(values[metric])) if metric else ()
    read = log_excerpt(log_path, step=step if isinstance(step, int) else None, words=words)
    tail = read.lines if read else []
    chart = draw(decision, recent, metric=metric, values=values, reason=decided.get("reason"))
    inspected = [log_path] if tail and log_path else []  # a tail was read only from a path
    dumped = ctx.store.get(decision.run, cp.dump) if cp.dump else None
    stacks = stacks_text(dumped) if isinstance(dumped, Event) else None
    pack = build_pack(state=cp.run, decision=decision, log_tail=tail, files_inspected=inspected,
                      root=ctx.evidence_dir, chart=chart, log_lines=read.span if read else None,
                      stacks=stacks)  # fmt: skip
    problems: list[tuple[Path, OSError]] = []
    pack_dir = ctx.evidence_dir / pack.relative_dir
    written: Path | None = None
    try:
        written = write_pack(ctx.evidence_dir, pack)
    except OSError as exc:
        problems.append((pack_dir, exc))
    findings: str | None = None
    if ctx.findings_file is not None:
        try:
            append_note(ctx.findings_file, findings_note(pack.evidence, pack_dir=pack_dir), decision_id=decision.id)
            findings = str(ctx.findings_file)
        except OSError as exc:
            problems.append((ctx.findings_file, exc))
    log.info("%s", pack.summary)
    share_pack(ctx, decision, pack)
    rule, host = decided.get("rule"), cp.run.host
    if not problems and written is not None:
        built: EvidenceBuiltData = {"decision": decision.id, "rule": rule, "path": str(written), "files": pack.files,
                                    "findings": findings, "summary": pack.summary, "run_host": host}  # fmt: skip
        return t.EVIDENCE_BUILT, built
    for where, error in problems:
        log.error("evidence for %s could not be written to %s: %s (the stop goes on)", decision.run, where, error)
    failed: EvidenceFailedData = {
        "decision": decision.id, "rule": rule, "path": str(problems[0][0]), "error": str(problems[0][1]),
        "problems": [f"{where}: {error}" for where, error in problems], "pack": str(written) if written else None,
        "findings": findings, "summary": pack.summary, "run_host": host,
    }  # fmt: skip
    return t.EVIDENCE_FAILED, failed


def draw(event: Event, recent: list[dict[str, Any]], *, metric: str | None, values: dict[str, Any],
         reason: object) -> bytes | None:  # fmt: skip
    """The chart of `metric` over the recent samples, trigger marked; None when drawing fails (logged): a
    plotting bug costs the chart, never the pack or the run's other work. A job timeout goes on up."""
    try:
        return render_chart(recent, metric=metric, trigger=values, title=f"{event.run}: {reason}")
    except JobTimeoutException:
        raise
    except Exception:
        log.exception("could not draw the chart for %s; it goes without one", event.id)
        return None


def share_pack(ctx: WorkerContext, decision: Event, pack: Pack) -> None:
    """The chart and report in Redis for a while, for a bot on another machine to upload (events/packfiles.py);
    a Redis error costs the upload, not the pack."""
    files = {REPORT: pack.report.encode(), **({CHART: pack.chart} if pack.chart else {})}
    try:
        if not packfiles.keep(ctx.redis, ctx.store.keys, run=decision.run, event_id=decision.id, files=files):
            log.warning("the evidence of %s is over %d bytes; Slack gets no chart", decision.run, packfiles.MAX_BYTES)
    except StoreError as exc:
        log.warning("could not keep the chart of %s for Slack: %s", decision.run, exc)


def chart_anomaly(ctx: WorkerContext, cp: Checkpoint, anomaly: Event) -> AnomalyChartedData | None:
    """Draw a critical anomaly's metric over the run's recent samples, trigger marked, and keep the PNG in Redis
    under the anomaly's id for the bot (events/packfiles.py); None (no upload, the anomaly's message stands)
    when there is no recorded metric to draw (a log line's anomaly), or drawing or keeping it fails."""
    opened = cast(AnomalyOpenedData, anomaly.data)
    values = opened.get("values") or {}
    recent = list(cp.run.recent_metrics)
    metric = triggering_metric(values, recent)
    if metric is None:
        return None
    chart = draw(anomaly, recent, metric=metric, values=values, reason=opened.get("reason"))
    try:
        if chart is None or not packfiles.keep(ctx.redis, ctx.store.keys, run=anomaly.run, event_id=anomaly.id,
                                               files={CHART: chart}):  # fmt: skip
            return None
    except StoreError as exc:  # costs the chart, not the run's other work
        log.warning("could not keep the chart of anomaly %s for Slack: %s", anomaly.id, exc)
        return None
    return {"anomaly": anomaly.id, "rule": opened.get("rule") or "", "severity": opened.get("severity") or "",
            "reason": opened.get("reason") or "", "metric": metric, "files": [CHART],
            "run_host": opened.get("run_host") or cp.run.host or anomaly.host}  # fmt: skip


def stop_run(ctx: WorkerContext, run: str, cp: Checkpoint, request: Event) -> tuple[str, StopResultData]:
    target = StopTarget.from_launch(run, cp.run.launch, default_host=cp.run.host or ctx.host)
    result = ctx.controller.stop(target)
    asked = cast(StopRequestedData, request.data)
    base: StopResultData = {"request": request.id, "method": result.method, "session": target.session,
                            "run_host": target.host, "reason": asked.get("reason")}  # fmt: skip
    if asked.get("by"):
        base["by"] = asked["by"]
    if result.ok:
        return t.STOP_DONE, {**base, "detail": result.detail}
    failed: StopResultData = {**base, "error": result.detail}
    if target.session:  # the one command that stops it by hand; otherwise the message says "by hand" alone
        failed["hint"] = " ".join(tmux_argv(target.tmux_socket, "kill-session", "-t", target.session))
    return t.STOP_FAILED, failed


def stop_by_agent(ctx: WorkerContext, watched: RunWatchedData, request: Event, action: StopRun, *,
                  producer: str, now: float) -> Event | Awaiting:  # fmt: skip
    """Ask the run host's agent to stop a watched run, without waiting for it (module docstring): `Awaiting`
    until the outcome it recorded is in the log, then that outcome (appending it again is a no-op); a
    `stop.failed` of our own, under the same id, when no agent is there to take it or it stays silent."""
    host = watched.get("host") or ctx.host
    asked = cast(StopRequestedData, request.data)
    if action.sent is None or action.due is None:
        problem = agent_stop.agent_absent(ctx.store, host, now=now)
        if problem is None:
            agent_stop.send_stop(ctx.store, host=host, request=request, reply_as=producer)
            due = now + agent_stop.answer_timeout(float(watched.get("stop_grace_s") or 10.0))
            return Awaiting(replace(action, sent=now, due=due), due)
    else:
        answer = agent_stop.answer(ctx.store, run=request.run, after=action.sid, reply_as=producer)
        if answer is not None:
            return answer
        if now < float(action.due):
            return Awaiting(action, float(action.due))
        waited = float(action.due) - float(action.sent)
        problem = f"the agent on {host} did not report the stop within {waited:.0f}s; is it still running?"
    failed: StopResultData = {"request": request.id, "method": "none", "session": watched.get("session"),
                              "run_host": host, "reason": asked.get("reason"), "error": problem}  # fmt: skip
    if asked.get("by"):
        failed["by"] = asked["by"]
    return make_event(t.STOP_FAILED, run=request.run, host=ctx.host, producer=producer, seq=1, data=failed, ts=now)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a failed run was not resumed, and what a person does about it (both go in `resume.skipped`)."""

    reason: str
    fix: str


# Where the worker's launches get their W&B key: the environment of the worker (`trainwarden up`).
WANDB_KEY_FIX = "export WANDB_API_KEY in the environment of `trainwarden up` (the worker launches resumes)"


def resume_run(ctx: WorkerContext, run: str, cp: Checkpoint, failure: Event, failure_sid: str) -> Refusal | None:
    """Relaunch a run that died (`failure`, its run.failed at stream id `failure_sid`) from its latest checkpoint;
    returns why not, or None once relaunched."""
    launch = cp.run.launch
    attempt = int(launch.get("attempt", 1))
    name = launch.get("experiment", run)
    if ctx.launcher is None:
        fix = "set servers_file in the settings of `trainwarden up` (the worker launches resumes)"
        return Refusal("no servers.yaml is configured on the workers", fix)
    experiment = ctx.launcher.fleet.experiments.get(name)
    if experiment is None or experiment.resume_command is None:
        return Refusal("the experiment has no resume_command",
                       f"add resume_command to {name}'s experiment file, or relaunch it by hand: "
                       f"`trainwarden launch {name}`")  # fmt: skip
    if attempt - 1 >= experiment.max_restarts:
        return Refusal(f"max_restarts ({experiment.max_restarts}) reached after {attempt} attempts",
                       f"look into why it keeps failing, then `trainwarden launch {name} --resume` "
                       f"(or raise max_restarts in {experiment.source})")  # fmt: skip
    for _, later in ctx.store.iter_run(run, after=failure_sid):
        if isinstance(later, Event) and later.type == t.RUN_LAUNCHED and later.data.get("attempt") == attempt + 1:
            return None  # this action ran before (crash before its commit): already relaunched
    after: ResumedAfterData = {"failure": failure.id, "exit_code": cast(RunEndedData, failure.data).get("exit_code"),
                               "rule": failed_by(cp.run.open_anomalies, failure.id)}  # fmt: skip
    try:
        extra = {**{k: launch[k] for k in ("plan",) if k in launch}, "resumed_after": after}
        ctx.launcher.launch(experiment.name, gpu_ids=launch.get("gpus"), resume=True, attempt=attempt + 1, extra=extra)
    except LaunchError as exc:
        fix = refusal_fix(exc, name)
        said = exc.args[0]
        if fix == WANDB_KEY_FIX:  # the preflight's own "(fix: run wandb login)" is a person's; this one is the worker's
            said = re.sub(r" \(fix: [^)]*\)", "", said)
        return Refusal(f"relaunch refused: {said}", fix)
    return None


def resume_key_missing(experiments: Iterable[Experiment], secrets: Mapping[str, str]) -> str | None:
    """Said at the worker's start: resumes are enabled (an experiment has resume_command) and need W&B, but
    the worker's environment (`secrets`) has no WANDB_API_KEY, so every resume would fail its preflight."""
    if secrets.get("WANDB_API_KEY"):
        return None
    names = sorted(e.name for e in experiments if e.resume_command is not None and not e.allow_offline_wandb)
    if not names:
        return None
    return (f"WANDB_API_KEY is not set: resumes of {', '.join(names)} will be refused (preflight wandb_login); "
            f"fix: {WANDB_KEY_FIX}")  # fmt: skip


def failed_by(open_anomalies: dict[str, dict[str, Any]], failure: str) -> str | None:
    """The rule of the last critical anomaly open when the run failed (an OOM, an NCCL timeout), not one the
    failure itself opened (`run-failed`: the exit code says that)."""
    critical = [a for a in open_anomalies.values()
                if a.get("severity") == CRITICAL and not a.get("shadow") and a.get("trigger") != failure]  # fmt: skip
    return str(max(critical, key=lambda a: float(a.get("ts") or 0))["rule"]) if critical else None


def refusal_fix(exc: LaunchError, name: str) -> str:
    """What to do about a relaunch the launcher refused: a missing W&B key is the worker's environment's."""
    if isinstance(exc, PreflightFailed) and exc.context.get("check") == "wandb_login":
        return WANDB_KEY_FIX
    return f"fix the cause above, then `trainwarden launch {name} --resume`"

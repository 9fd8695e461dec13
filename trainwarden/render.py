"""Plain-text views of the log for the CLI: one line per event, and a run's folded state."""

from __future__ import annotations

import json
import time
from typing import Any, cast

from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.dumps import stuck_text
from trainwarden.events.envelope import Event
from trainwarden.events.projection import RunState, unknown_types
from trainwarden.events.store import Malformed
from trainwarden.events.words import fmt, said


def fmt_metrics(data: dict[str, Any]) -> str:
    keys = sorted(data, key=lambda k: (k != "step", k))
    return " ".join(f"{k}={fmt(data[k])}" for k in keys)


def fmt_ts(ts: float | None) -> str:
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) + f".{int((ts % 1) * 1000):03d}"


def describe(event: Event) -> str:
    """One line; each type's payload is read through its type (events/payloads.py), `.get` because a log
    may hold events written by another version."""
    d = event.data
    if event.type == t.METRIC:
        return fmt_metrics(d)
    if event.type == t.DECISION:
        decided = cast(p.DecisionData, d)
        rule = f" by {decided['rule']}" if decided.get("rule") else ""
        policy = f" [policy {decided['policy']}]" if decided.get("policy") else ""
        return f"{said(decided.get('decision'))}{rule}: {said(decided.get('reason'), 'no reason recorded')}{policy}"
    if event.type == t.DECISION_SHADOW:
        shadow = cast(p.DecisionShadowData, d)
        what = f"would have decided {said(shadow.get('decision'))} by {said(shadow.get('rule'), 'a rule')}"
        return f"{what} (shadow mode): {said(shadow.get('reason'), 'no reason recorded')}"
    if event.type == t.ANOMALY_OPENED:
        opened = cast(p.AnomalyOpenedData, d)
        mark = " [shadow]" if opened.get("shadow") else ""
        severity = f" ({opened['severity']})" if opened.get("severity") else ""
        return (
            f"{said(opened.get('rule'), 'a rule')}{severity}{mark}: {said(opened.get('reason'), 'no reason recorded')}"
        )
    if event.type == t.ANOMALY_RESOLVED:
        return f"{said(cast(p.AnomalyResolvedData, d).get('rule'), 'an anomaly')} resolved"
    if event.type == t.RUN_LAUNCHED:
        launched = cast(p.RunLaunchedData, d)
        session = f"session {launched['session']}" if launched.get("session") else "no tmux session"
        log_path = said(launched.get("log_path"), "not recorded")
        return f"{session} on {said(launched.get('host'), event.host)}, log {log_path}{resumed(launched)}"
    if event.type == t.RESUME_SKIPPED:
        skipped = cast(p.ResumeSkippedData, d)
        fix = f"; fix: {skipped['fix']}" if skipped.get("fix") else ""
        return f"not resumed: {said(skipped.get('reason'), 'no reason recorded')}{fix}"
    if event.type == t.STOP_REQUESTED:
        asked = cast(p.StopRequestedData, d)
        by, user = asked.get("by"), asked.get("user")
        who = f"{by} ({user})" if by and user else by or user or "?"  # who asked, through what: "cli (ana)"
        return (
            f"by {who}"
            + (f" ({asked['rule']})" if asked.get("rule") else "")
            + f": {said(asked.get('reason'), 'no reason given')}"
        )
    if event.type == t.STOP_DONE:
        done = cast(p.StopResultData, d)
        return f"{said(done.get('method'), 'stopped')}: {said(done.get('detail'), 'no detail recorded')}"
    if event.type == t.STOP_FAILED:
        failed = cast(p.StopResultData, d)
        return f"{said(failed.get('method'), 'stop')}: {said(failed.get('error'), 'no error recorded')}"
    if event.type == t.EVIDENCE_BUILT:
        return said(cast(p.EvidenceBuiltData, d).get("path"), "no path recorded")
    if event.type == t.LOG_LINE:
        line = cast(p.LogLineData, d)
        return f"[{said(line.get('tag'), 'line')}] {said(line.get('line'), '')}"
    if event.type == t.TICK:
        return "scheduled evaluation of a quiet run"
    if event.type == t.PROCESS_DUMP:  # its text: stacks.txt in the latest pack, or the event itself
        return f"{stuck_text(d)} ({said(d.get('method'))}, {said(d.get('processes'))} processes)"
    if event.type == t.POLICY_APPLIED:
        applied = cast(p.PolicyAppliedData, d)
        return (f"policy {said(applied.get('name'), '')} {said(applied.get('policy'))} evaluates from entry "
                f"{said(applied.get('from'))}")  # fmt: skip
    if event.type == t.POLICY_LOADED:
        loaded = cast(p.PolicyLoadedData, d)
        return (
            f"policy {said(loaded.get('name'), '')} {said(loaded.get('policy'))} loaded from "
            f"{said(loaded.get('source'), 'an unrecorded source')} ({said(loaded.get('rules'))} rules)"
        )
    if event.type == t.POLICY_REJECTED:
        rejected = cast(p.PolicyRejectedData, d)
        problems = "; ".join(rejected.get("problems") or ["no problem recorded"])
        return f"policy file {said(rejected.get('source'))} rejected, kept {said(rejected.get('kept'))}: {problems}"
    if event.type == t.COMPONENT_SILENT:
        silent = cast(p.ComponentSilentData, d)
        error = f"; last error: {silent['last_error']}" if silent.get("last_error") else ""
        who = f"{said(silent.get('component'), 'a daemon')}{_pid(silent.get('pid'))}"
        return f"{who} silent for {silent.get('silent_s', 0):.0f}s{error}"
    if event.type == t.COMPONENT_RECOVERED:
        back = cast(p.ComponentRecoveredData, d)
        who = f"{said(back.get('component'), 'a daemon')}{_pid(back.get('pid'))}"
        return f"{who} beats again after {back.get('silent_s', 0):.0f}s"
    note = "" if event.type in t.KNOWN_TYPES else "(unknown type, kept) "
    return (note + " ".join(f"{k}={_field(v)}" for k, v in sorted(d.items())))[:300]


def resumed(launched: p.RunLaunchedData) -> str:
    """`, attempt 2, resumed from /ck/epoch_9.pt after exit code 137` for a resume; nothing for a first launch."""
    if not launched.get("resume") and int(launched.get("attempt") or 1) == 1:
        return ""
    start = f" from {launched['checkpoint']}" if launched.get("checkpoint") else ""
    after = launched.get("resumed_after")
    cause = f" after exit code {said(after.get('exit_code'), 'unknown')}" if after else ""
    rule = f" ({after['rule']})" if after and after.get("rule") else ""
    return f", attempt {said(launched.get('attempt'), '?')}, resumed{start}{cause}{rule}"


def _field(value: Any) -> str:
    """A payload field in a timeline line: `-` when absent, JSON only for nested values."""
    if isinstance(value, dict | list):
        return json.dumps(value, default=str, sort_keys=True)
    return said(value, "-")


def timeline_line(sid: str, item: Event | Malformed) -> str:
    if isinstance(item, Malformed):
        return f"{'':23}  {'!! undecodable':16}  entry {sid}: {item.reason}"
    return f"{fmt_ts(item.ts)}  {item.type:16}  {describe(item)}"


def state_lines(state: RunState) -> list[str]:
    lines = [
        f"run:        {state.run}",
        f"host:       {state.host or '-'}",
        f"status:     {state.status}",
        f"decision:   {state.decision or '-'}",
        f"step:       {state.step if state.step is not None else '-'}",
        f"last:       {fmt_metrics(state.last_metrics) or '-'}",
        f"events:     {state.event_count} ({fmt_ts(state.first_ts)} .. {fmt_ts(state.last_ts)})",
        f"anomalies:  {state.anomalies_opened} opened, open now: {_open(state.open_anomalies) or 'none'}",
    ]
    if state.launch:
        session = f"tmux session {state.launch['session']}" if state.launch.get("session") else "no tmux session"
        log_path = said(state.launch.get("log_path"), "not recorded")
        lines.append(f"launch:     {session}, log {log_path}{resumed(state.launch)}")
    for d in state.decisions[-5:]:
        lines.append(
            f"decision:   {fmt_ts(d.get('ts'))} {said(d.get('decision'))} ({d.get('rule') or '-'}) "
            f"{said(d.get('reason'), '')}"
        )
    for s in state.stops[-5:]:
        lines.append(
            f"stop:       {fmt_ts(s.get('ts'))} {said(s.get('type'))} {s.get('detail') or s.get('error') or ''}"
        )
    for c in state.commands[-5:]:
        lines.append(
            f"command:    {fmt_ts(c.get('ts'))} {said(c.get('type'))} {said(c.get('user'))}: {said(c.get('text'), '')}"
        )
    for path in state.evidence[-5:]:
        lines.append(f"evidence:   {path}")
    if state.dump:
        lines.append(f"stuck:      {fmt_ts(state.dump.get('ts'))} {stuck_text(state.dump)} (its process.dump)")
    unknown = unknown_types(state)
    if unknown:
        lines.append("unknown:    " + ", ".join(f"{name} x{n}" for name, n in sorted(unknown.items())))
    return lines


def _pid(pid: object) -> str:
    return f" (pid {pid})" if pid is not None else ""


def _open(anomalies: dict[str, dict[str, Any]]) -> str:
    """Open anomalies by rule; a rule in shadow mode says so (it decides nothing)."""
    return ", ".join(f"{rule} (shadow)" if a.get("shadow") else rule for rule, a in anomalies.items())

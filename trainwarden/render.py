"""Plain-text views of the log for the CLI: one line per event, and a run's folded state."""

from __future__ import annotations

import json
import math
import time
from typing import Any, cast

from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.projection import RunState, unknown_types
from trainwarden.events.store import Malformed


def fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return str(value) if not math.isfinite(value) else f"{value:.6g}"
    return str(value)


def fmt_metrics(data: dict[str, Any]) -> str:
    keys = sorted(data, key=lambda k: (k != "step", k))
    return " ".join(f"{k}={fmt_value(data[k])}" for k in keys)


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
        return f"{decided.get('decision')}{rule}: {decided.get('reason')} [policy {decided.get('policy')}]"
    if event.type == t.DECISION_SHADOW:
        shadow = cast(p.DecisionShadowData, d)
        what = f"would have decided {shadow.get('decision')} by {shadow.get('rule')}"
        return f"{what} (shadow mode): {shadow.get('reason')}"
    if event.type == t.ANOMALY_OPENED:
        opened = cast(p.AnomalyOpenedData, d)
        mark = " [shadow]" if opened.get("shadow") else ""
        return f"{opened.get('rule')} ({opened.get('severity')}){mark}: {opened.get('reason')}"
    if event.type == t.ANOMALY_RESOLVED:
        return f"{cast(p.AnomalyResolvedData, d).get('rule')} resolved"
    if event.type == t.RUN_LAUNCHED:
        launched = cast(p.RunLaunchedData, d)
        return f"session {launched.get('session')} on {launched.get('host')}, log {launched.get('log_path')}"
    if event.type == t.STOP_REQUESTED:
        asked = cast(p.StopRequestedData, d)
        who = asked.get("by") or asked.get("user") or "?"
        return f"by {who}" + (f" ({asked['rule']})" if asked.get("rule") else "") + f": {asked.get('reason')}"
    if event.type == t.STOP_DONE:
        done = cast(p.StopResultData, d)
        return f"{done.get('method')}: {done.get('detail')}"
    if event.type == t.STOP_FAILED:
        failed = cast(p.StopResultData, d)
        return f"{failed.get('method')}: {failed.get('error')}"
    if event.type == t.EVIDENCE_BUILT:
        return f"{cast(p.EvidenceBuiltData, d).get('path')}"
    if event.type == t.LOG_LINE:
        line = cast(p.LogLineData, d)
        return f"[{line.get('tag')}] {line.get('line')}"
    if event.type == t.TICK:
        return "scheduled evaluation of a quiet run"
    if event.type == t.POLICY_APPLIED:
        applied = cast(p.PolicyAppliedData, d)
        return f"policy {applied.get('name')} {applied.get('policy')} evaluates from entry {applied.get('from')}"
    if event.type == t.POLICY_LOADED:
        loaded = cast(p.PolicyLoadedData, d)
        return (
            f"policy {loaded.get('name')} {loaded.get('policy')} loaded from {loaded.get('source')} "
            f"({loaded.get('rules')} rules)"
        )
    if event.type == t.POLICY_REJECTED:
        rejected = cast(p.PolicyRejectedData, d)
        return f"policy file {rejected.get('source')} rejected, kept {rejected.get('kept')}: " + "; ".join(
            rejected.get("problems", [])
        )
    if event.type == t.COMPONENT_SILENT:
        silent = cast(p.ComponentSilentData, d)
        error = f"; last error: {silent['last_error']}" if silent.get("last_error") else ""
        return f"{silent.get('component')} (pid {silent.get('pid')}) silent for {silent.get('silent_s', 0):.0f}s{error}"
    if event.type == t.COMPONENT_RECOVERED:
        back = cast(p.ComponentRecoveredData, d)
        return f"{back.get('component')} (pid {back.get('pid')}) beats again after {back.get('silent_s', 0):.0f}s"
    note = "" if event.type in t.KNOWN_TYPES else "(unknown type, kept) "
    return note + json.dumps(d, default=str, sort_keys=True)[:300]


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
        lines.append(f"launch:     tmux session {state.launch.get('session')}, log {state.launch.get('log_path')}")
    for d in state.decisions[-5:]:
        lines.append(
            f"decision:   {fmt_ts(d.get('ts'))} {d.get('decision')} ({d.get('rule') or '-'}) {d.get('reason')}"
        )
    for s in state.stops[-5:]:
        lines.append(f"stop:       {fmt_ts(s.get('ts'))} {s.get('type')} {s.get('detail') or s.get('error') or ''}")
    for c in state.commands[-5:]:
        lines.append(f"command:    {fmt_ts(c.get('ts'))} {c.get('type')} {c.get('user')}: {c.get('text')}")
    for path in state.evidence[-5:]:
        lines.append(f"evidence:   {path}")
    unknown = unknown_types(state)
    if unknown:
        lines.append("unknown:    " + ", ".join(f"{name} x{n}" for name, n in sorted(unknown.items())))
    return lines


def _open(anomalies: dict[str, dict[str, Any]]) -> str:
    """Open anomalies by rule; a rule in shadow mode says so (it decides nothing)."""
    return ", ".join(f"{rule} (shadow)" if a.get("shadow") else rule for rule, a in anomalies.items())

"""Plain-text views of the log for the CLI: one line per event, and a run's folded state."""

from __future__ import annotations

import json
import math
import time
from typing import Any

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
    d = event.data
    if event.type == t.METRIC:
        return fmt_metrics(d)
    if event.type == t.DECISION:
        rule = f" by {d['rule']}" if d.get("rule") else ""
        return f"{d.get('decision')}{rule}: {d.get('reason')} [policy {d.get('policy')}]"
    if event.type == t.ANOMALY_OPENED:
        return f"{d.get('rule')} ({d.get('severity')}): {d.get('reason')}"
    if event.type == t.ANOMALY_RESOLVED:
        return f"{d.get('rule')} resolved"
    if event.type == t.RUN_LAUNCHED:
        return f"session {d.get('session')} on {d.get('host')}, log {d.get('log_path')}"
    if event.type == t.STOP_REQUESTED:
        who = d.get("by") or d.get("user") or "?"
        return f"by {who}" + (f" ({d['rule']})" if d.get("rule") else "") + f": {d.get('reason')}"
    if event.type == t.STOP_DONE:
        return f"{d.get('method')}: {d.get('detail')}"
    if event.type == t.STOP_FAILED:
        return f"{d.get('method')}: {d.get('error')}"
    if event.type == t.EVIDENCE_BUILT:
        return f"{d.get('path')}"
    if event.type == t.LOG_LINE:
        return f"[{d.get('tag')}] {d.get('line')}"
    if event.type == t.TICK:
        return "scheduled evaluation of a quiet run"
    if event.type == t.POLICY_APPLIED:
        return f"policy {d.get('name')} {d.get('policy')} evaluates from entry {d.get('from')}"
    if event.type == t.POLICY_LOADED:
        return f"policy {d.get('name')} {d.get('policy')} loaded from {d.get('source')} ({d.get('rules')} rules)"
    if event.type == t.POLICY_REJECTED:
        return f"policy file {d.get('source')} rejected, kept {d.get('kept')}: " + "; ".join(d.get("problems", []))
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
        f"anomalies:  {state.anomalies_opened} opened, open now: {', '.join(state.open_anomalies) or 'none'}",
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

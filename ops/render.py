"""Plain-text views of the log for the CLI: one line per event, and a run's folded state."""

from __future__ import annotations

import time
from typing import Any

from trainwarden.core.dumps import stuck_text
from trainwarden.core.words import said
from trainwarden.events.catalogue import BY_NAME
from trainwarden.events.envelope import Event
from trainwarden.events.payloads.observed import fmt_metrics
from trainwarden.events.payloads.runs import resumed
from trainwarden.events.projection import RunState, unknown_types
from trainwarden.events.registry import fields_line
from trainwarden.events.store import Malformed


def fmt_ts(ts: float | None) -> str:
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) + f".{int((ts % 1) * 1000):03d}"


def describe(event: Event) -> str:
    """One line: the type's own (its declaration's `describe`, events/payloads/), else its fields. A type's
    describer reads `.get` because a log may hold events written by another version."""
    spec = BY_NAME.get(event.type)
    if spec is not None:
        return spec.describe(event)
    return ("(unknown type, kept) " + fields_line(event))[:300]


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


def _open(anomalies: dict[str, dict[str, Any]]) -> str:
    """Open anomalies by rule; a rule in shadow mode says so (it decides nothing)."""
    return ", ".join(f"{rule} (shadow)" if a.get("shadow") else rule for rule, a in anomalies.items())

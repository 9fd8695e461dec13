"""The training-check report (the seed's format), for a STOP's evidence pack and for `trainwarden check`.

    ## Training Check - <time>
    - Data source: sidecar | wandb_ok | log_fallback | log | unreachable
    - Run, Recent metrics, Anomalies, Evidence, Decision, Reason, Next check

Pure: a dict of facts in, Markdown out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from trainwarden.events.codec import json_safe
from trainwarden.events.metrics import at_step
from trainwarden.events.projection import RunState

METRICS_IN_REPORT = 10
SUMMARY_METRICS = ("loss", "val_loss", "lr", "grad_norm", "tokens_per_s")


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return str(value) if not math.isfinite(value) else f"{value:.6g}"
    return str(value)


def metrics_summary(recent: Sequence[dict[str, Any]]) -> str:
    """`loss 2.31 (from 2.9 over 50 samples), lr 0.0003, grad_norm 1.2`: the last value and where it came from."""
    parts = []
    for name in SUMMARY_METRICS:
        values = [m[name] for m in recent if name in m]
        if not values:
            continue
        part = f"{name} {fmt(values[-1])}"
        if len(values) > 1 and values[0] != values[-1]:
            part += f" (from {fmt(values[0])} over {len(values)} samples)"
        parts.append(part)
    return ", ".join(parts) or "no metrics yet"


def check_facts(state: RunState, *, now: float, next_check: str, files_inspected: list[str]) -> dict[str, Any]:
    """The facts of a report on the run's current state (what `trainwarden check RUN` prints)."""
    last = state.decisions[-1] if state.decisions else {}
    return {
        "run": state.run,
        "host": state.host,
        "decision": state.decision or "CONTINUE",
        "rule": last.get("rule"),
        "reason": last.get("reason") or "no decision recorded yet",
        "severity": last.get("severity"),
        "remedy": last.get("remedy"),
        "offending_values": last.get("values", {}),
        "trigger_event": last.get("trigger"),
        "decision_event": last.get("id"),
        "policy": last.get("policy"),
        "decided_at": utc(now).isoformat(),
        "step": state.step,
        "recent_metrics": list(state.recent_metrics),
        "open_anomalies": state.open_anomalies,
        "log_tail": [str(line.get("line", "")) for line in state.recent_log_lines],
        "wandb_url": state.launch.get("wandb_url"),
        "data_source": state.source or "log_fallback",
        "files_inspected": files_inspected,
        "next_check": next_check,
    }


def render_report(ev: dict[str, Any]) -> str:
    """The training-check report format, as Markdown."""
    metrics = ev["recent_metrics"][-METRICS_IN_REPORT:]
    names = sorted({k for m in metrics for k in m if k not in ("ts", "id")}, key=lambda k: (k != "step", k))
    lines = [
        f"## Training Check - {ev['decided_at']}",
        "",
        f"- **Data source**: {ev['data_source']}",
        f"- **Run**: {ev['run']} on {ev['host']} ({at_step(ev['step'])})",
        f"- **Recent metrics**: {metrics_summary(ev['recent_metrics'])}",
        f"- **Anomalies**: {', '.join(ev['open_anomalies']) or 'none open'}",
        f"- **Decision**: {ev['decision']}",
        f"- **Rule**: {ev['rule']} ({ev['severity']})",
        f"- **Reason**: {ev['reason']}",
        f"- **Remedy**: {ev['remedy']}",
        f"- **Next check**: {ev['next_check']}",
        "",
        "### Recent metrics",
        "",
    ]
    if metrics:
        lines.append("| " + " | ".join(names) + " |")
        lines.append("|" + "---|" * len(names))
        lines.extend("| " + " | ".join(fmt(m.get(n, "")) for n in names) + " |" for m in metrics)
    else:
        lines.append("(no metrics recorded)")
    lines += ["", "### Anomalies", ""]
    lines += [f"- {rule}: {a.get('reason')} ({a.get('severity')})" for rule, a in ev["open_anomalies"].items()] or [
        "(none open)"
    ]
    lines += ["", "### Evidence", "", f"- Offending values: {json.dumps(json_safe(ev['offending_values']))}"]
    lines.append(f"- Trigger event: {ev['trigger_event']}; decision event: {ev['decision_event']}")
    lines.append(f"- Policy: {ev['policy']}")
    if ev["wandb_url"]:
        lines.append(f"- W&B: {ev['wandb_url']}")
    if ev.get("chart"):
        lines.append(f"- Chart: {ev['chart']}")
    lines += [f"- File inspected: {f}" for f in ev["files_inspected"]]
    lines += ["", "### Last log lines", "", "```", *ev["log_tail"], "```", ""]
    if ev.get("final_summary"):
        lines += ["### FINAL_SUMMARY", "", ev["final_summary"], ""]
    return "\n".join(lines)

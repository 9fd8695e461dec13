"""The training-check report (the seed's format), for a STOP's evidence pack and for `trainwarden check`.

    ## Training Check - <time>
    - Data source: sidecar | wandb_ok | log_fallback | log | unreachable
    - Run, Recent metrics, Anomalies, Evidence, Decision, Reason, Next check

Pure: a dict of facts in, Markdown out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from trainwarden.events import reading
from trainwarden.events import types as t
from trainwarden.events.metrics import at_step
from trainwarden.events.projection import ENDED, RunState
from trainwarden.events.words import fmt, said

METRICS_IN_REPORT = 10
SUMMARY_METRICS = ("loss", "val_loss", "lr", "grad_norm", "tokens_per_s")


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


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
        "decision": state.decision,  # None: no rule has decided anything yet
        "status": state.status,  # "stopped", "finished", "failed": the run has ended
        "rule": last.get("rule"),
        "reason": last.get("reason"),
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
        "data_source": state.source,
        "reading": state.reading,  # the agent's latest `reading` status: whether it reads the run's metrics at all
        "files_inspected": files_inspected,
        "next_check": next_check,
    }


def values_text(values: Any) -> str:
    """Offending values as `loss=nan, step=25`, not as a dict."""
    if not isinstance(values, dict) or not values:
        return "none"
    return ", ".join(f"{k}={fmt(v)}" for k, v in values.items())


def metrics_line(ev: dict[str, Any]) -> str:
    """The report's recent metrics; never "no metrics yet" for a run read blind, nor beside a `loss nan` line."""
    said = metrics_summary(ev["recent_metrics"])
    status = ev.get("reading") or {}
    if status.get("status") == reading.UNREADABLE:
        return f"UNREADABLE: {reading.unreadable_text(str(status.get('reason') or 'no training metric read'))}"
    if ev["recent_metrics"]:
        return said
    line = reading.nonfinite_line(ev.get("log_tail") or [])
    if line is not None:
        return f"none read, yet the log says `{reading.sample(line)}`: {reading.unreadable_text('no metric read')}"
    return said


def anomaly_text(anomaly: dict[str, Any]) -> str:
    severity = f" ({anomaly['severity']})" if anomaly.get("severity") else ""
    return said(anomaly.get("reason"), "no reason recorded") + severity


def render_report(ev: dict[str, Any]) -> str:
    """The training-check report format, as Markdown; a fact not known says so in words."""
    metrics = ev["recent_metrics"][-METRICS_IN_REPORT:]
    names = sorted({k for m in metrics for k in m if k not in ("ts", "id")}, key=lambda k: (k != "step", k))
    decided = ev.get("decision_event") is not None or ev.get("rule") is not None
    ended = ev.get("status") in ENDED
    undecided = (
        f"none (the run has {ev['status']})" if ended else "none yet (no rule has decided anything; the run continues)"
    )
    no_remedy = "see the open anomalies" if ev["open_anomalies"] else "nothing to do"
    acted = ev["decision"] in (t.STOP, t.WAIT)
    severity = f" ({ev['severity']})" if ev.get("severity") else ""
    lines = [
        f"## Training Check - {ev['decided_at']}",
        "",
        f"- **Data source**: {said(ev.get('data_source'), 'not announced by the agent yet')}",
        f"- **Run**: {said(ev['run'], 'unknown run')} on {said(ev['host'], 'an unknown host')} ({at_step(ev['step'])})",
        f"- **Recent metrics**: {metrics_line(ev)}",
        f"- **Anomalies**: {', '.join(ev['open_anomalies']) or 'none open'}",
        f"- **Decision**: {said(ev['decision'], undecided)}",
        f"- **Rule**: {said(ev['rule'], 'manual' if acted else 'none fired')}{severity}",
        f"- **Reason**: {said(ev['reason'], 'not recorded' if decided else 'no decision recorded yet')}",
        f"- **Remedy**: {said(ev['remedy'], 'none given by the policy' if acted else no_remedy)}",
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
    lines += [f"- {rule}: {anomaly_text(a)}" for rule, a in ev["open_anomalies"].items()] or ["(none open)"]
    lines += ["", "### Evidence", "", f"- Offending values: {values_text(ev['offending_values'])}"]
    if decided:
        lines.append(f"- Trigger event: {said(ev['trigger_event'], 'not recorded')}; "
                     f"decision event: {said(ev['decision_event'], 'not recorded')}")  # fmt: skip
        lines.append(f"- Policy: {said(ev['policy'], 'not recorded')}")
    else:
        lines.append("- Trigger event: none (no decision yet)")
    if ev["wandb_url"]:
        lines.append(f"- W&B: {ev['wandb_url']}")
    if ev.get("chart"):
        lines.append(f"- Chart: {ev['chart']}")
    lines += [f"- File inspected: {f}" for f in ev["files_inspected"]]
    tail = ev["log_tail"] or ["(no log lines recorded)"]
    lines += ["", "### Last log lines", "", "```", *tail, "```", ""]
    if ev.get("final_summary"):
        lines += ["### FINAL_SUMMARY", "", ev["final_summary"], ""]
    return "\n".join(lines)

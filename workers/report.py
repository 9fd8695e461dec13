"""The training-check report, for `trainwarden check RUN` and a STOP's evidence pack (one format for both).

The training-check method's eight lines come first, exactly, in its order; trainwarden's own fields (the
actual source, rule, remedy, policy) follow them, then FINAL_SUMMARY for a stopped run, then the tables:

    ## Training Check - 2026-12-06 14:03 CET

    - Data source: wandb_ok | log_fallback | unreachable
    - Run: exp01 on gpu1 (running, step 200)
    - Recent metrics: loss 2.31 (from 2.9 over 50 samples), lr 0.0003
    - Anomalies: loss-spike: loss=9 > 2x recent average 2.4 (warning)
    - Evidence: values loss=9, step=200; log /data/exp01/train.log lines 191-200; W&B https://...
    - Decision: CONTINUE | WAIT | STOP (an ended run: `none (run ended: finished)`)
    - Reason: ...
    - Next check: 2026-12-06 14:33 CET (or `none (run ended)`)

Pure: a dict of facts in, Markdown out (`check_facts` and evidence.build_pack gather the facts).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from trainwarden.core.dumps import stuck_text
from trainwarden.core.metrics import at_step
from trainwarden.core.words import fmt, local_time, said
from trainwarden.events import reading
from trainwarden.events import types as t
from trainwarden.events.packfiles import STACKS
from trainwarden.events.projection import ENDED, RunState
from trainwarden.policies.durations import fmt_duration

METRICS_IN_REPORT = 10
SUMMARY_METRICS = ("loss", "val_loss", "lr", "grad_norm", "tokens_per_s")

# The method's data sources; the agent's own (events/projection.py: sidecar, log, ...) map onto them.
WANDB_OK = "wandb_ok"
LOG_FALLBACK = "log_fallback"
UNREACHABLE = "unreachable"
SOURCE_WORDS = {
    "wandb_ok": "wandb_ok (W&B history rows)",
    "sidecar": "sidecar (the run's sidecar metrics file, written by the training process)",
    "log_fallback": "log_fallback (the run's log: its W&B is not found, unreadable, down or stale)",
    "log": "log (the run's log; the run does not use W&B)",
    "unreachable": "unreachable (the agent can read neither W&B nor the log)",
}
NO_NEXT_CHECK = "none (run ended)"


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def data_source(state: RunState, *, now: float, stale_s: float | None = None) -> tuple[str, str]:
    """(the method's data source, the actual one in words). W&B read and fresh: wandb_ok; the log, the sidecar
    or a metric file: log_fallback; nothing readable, or W&B's last row older than `stale_s` (settings'
    agent.wandb_stale_s; None: not judged, as for a pack built at the decision) while the run goes on: unreachable."""
    source = state.source
    has_data = bool(state.recent_metrics or state.recent_log_lines)
    if source is None:
        if has_data:
            return LOG_FALLBACK, "not announced by the agent; its metrics and lines came from the run's log"
        return UNREACHABLE, "not announced by the agent yet, and nothing read from the run"
    actual = SOURCE_WORDS.get(source, f"{source} (a metric file)")
    if source == UNREACHABLE:
        return UNREACHABLE, actual
    if source == WANDB_OK:
        age = None if state.last_metric_ts is None else now - state.last_metric_ts
        if stale_s is not None and state.status not in ENDED and age is not None and age > stale_s:
            return UNREACHABLE, f"{actual}, but its last row is {fmt_duration(age)} old (stale after " \
                                f"{fmt_duration(stale_s)})"  # fmt: skip
        return WANDB_OK, actual
    return LOG_FALLBACK, actual


def next_check(status: str, decision: str | None, *, now: float, interval_s: float) -> str:
    """The method's `Next check`: the interval later, or none once the run ended or is being stopped."""
    if status in ENDED:
        return NO_NEXT_CHECK
    if decision == t.STOP or status == "stopping":
        return "none (run being stopped)"
    return local_time(now + interval_s)


def stop_behind(state: RunState) -> dict[str, Any]:
    """The STOP that ended a stopped run: its decision, or the stop asked for by hand (/stop, the CLI)."""
    stop = next((d for d in reversed(state.decisions) if d.get("decision") == t.STOP), None)
    if stop is not None:
        return stop
    asked: dict[str, Any] = next((s for s in reversed(state.stops) if s.get("type") == t.STOP_REQUESTED), {})
    return {"decision": t.STOP, "rule": asked.get("rule") or "manual",
            "reason": asked.get("reason") or f"stopped by {asked.get('by') or 'hand'}"}  # fmt: skip


def check_facts(
    state: RunState, *, now: float, interval_s: float, files_inspected: list[str], stale_s: float | None = None
) -> dict[str, Any]:
    """The facts of a report on the run's current state (what `trainwarden check RUN` prints)."""
    last = stop_behind(state) if state.status == "stopped" else state.decisions[-1] if state.decisions else {}
    source, actual = data_source(state, now=now, stale_s=stale_s)
    log_path = state.launch.get("log_path") or (state.watched.get("log_path") if state.watched else None)
    return {
        "run": state.run,
        "host": state.host,
        "decision": last.get("decision"),  # None: no rule has decided anything yet
        "status": state.status,  # "stopped", "finished", "failed": the run has ended
        "exit_code": state.exit_code,
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
        "log_path": log_path,
        "log_lines": None,  # `lines 41-50` once read from the file
        "wandb_url": state.launch.get("wandb_url"),
        "evidence_pack": state.evidence[-1] if state.evidence else None,
        "stuck": state.dump,  # where the latest process.dump found it (its stacks: stacks.txt in the latest pack)
        "stacks": STACKS if state.dump and state.evidence else None,
        "data_source": source,
        "source": actual,
        "reading": state.reading,  # the agent's latest `reading` status: whether it reads the run's metrics at all
        "files_inspected": files_inspected,
        "next_check": next_check(state.status, last.get("decision"), now=now, interval_s=interval_s),
    }


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
        facts = str(status.get("reason") or "no training metric read")
        return f"{reading.label(facts)}: {reading.unreadable_text(facts)}"
    if ev["recent_metrics"]:
        return said
    line = reading.nonfinite_line(ev.get("log_tail") or [])
    if line is not None:
        return f"none read, yet the log says `{reading.sample(line)}`: {reading.unreadable_text('no metric read')}"
    return said


def anomaly_text(anomaly: dict[str, Any]) -> str:
    severity = f" ({anomaly['severity']})" if anomaly.get("severity") else ""
    return said(anomaly.get("reason"), "no reason recorded") + severity


def anomalies_text(anomalies: dict[str, dict[str, Any]]) -> str:
    return "; ".join(f"{rule}: {anomaly_text(a)}" for rule, a in anomalies.items()) or "none open"


def evidence_text(ev: dict[str, Any]) -> str:
    """The method's Evidence field: values, the log's path and line numbers, the W&B URL, the pack's path."""
    parts = []
    if ev.get("offending_values"):
        parts.append(f"values {values_text(ev['offending_values'])}")
    log_path = ev.get("log_path")
    if log_path:
        parts.append(f"log {log_path} {ev['log_lines']}" if ev.get("log_lines") else
                     f"log {log_path} (not readable from here)")  # fmt: skip
    if ev.get("wandb_url"):
        parts.append(f"W&B {ev['wandb_url']}")
    if ev.get("evidence_pack"):
        parts.append(f"evidence pack {ev['evidence_pack']}")
    if ev.get("chart"):
        parts.append(
            f"chart {ev['evidence_pack']}/{ev['chart']}" if ev.get("evidence_pack") else f"chart {ev['chart']}"
        )
    if ev.get("stuck"):
        stacks = (f"stacks {ev['evidence_pack']}/{ev['stacks']}" if ev.get("stacks") and ev.get("evidence_pack")
                  else "stacks in the run's process.dump event (no pack written yet)")  # fmt: skip
        parts.append(f"{stuck_text(ev['stuck'])}; {stacks}")
    parts += [f for f in ev.get("files_inspected") or [] if f != log_path]
    return "; ".join(parts) or "none recorded"


def verdict(ev: dict[str, Any]) -> tuple[str, str]:
    """(Decision, Reason) as the method says them: an ended run said as ended, missing data a WAIT."""
    status = ev.get("status")
    if status in ("finished", "failed"):
        code = ev.get("exit_code")
        ended = f"exit {code}" if code is not None else "exit code unknown"
        where = at_step(ev["step"]) if ev["step"] is None else f"at {at_step(ev['step'])}"
        return f"none (run ended: {status})", f"{status} {where} ({ended})"
    if status in ("stopped", "stopping") or ev["decision"] == t.STOP:
        return t.STOP, said(ev["reason"], "not recorded")
    if ev["data_source"] == UNREACHABLE:
        return t.WAIT, f"no data to judge the run by ({ev['source']}); a run is never stopped for missing data"
    if ev["decision"] is None:
        early = "" if ev["recent_metrics"] else "; no metric read yet"
        return t.WAIT, f"too early: no rule has decided anything yet{early}"
    return ev["decision"], said(ev["reason"], "not recorded")


def checked_at(ev: dict[str, Any]) -> str:
    return local_time(datetime.fromisoformat(ev["decided_at"]).timestamp())


def render_report(ev: dict[str, Any]) -> str:
    """The training-check report as Markdown; a fact not known says so in words."""
    decision, reason = verdict(ev)
    status = ev.get("status") or "unknown"
    lines = [
        f"## Training Check - {checked_at(ev)}",
        "",
        f"- Data source: {ev['data_source']}",
        f"- Run: {said(ev['run'], 'unknown run')} on {said(ev['host'], 'an unknown host')} "
        f"({status}, {at_step(ev['step'])})",
        f"- Recent metrics: {metrics_line(ev)}",
        "- Anomalies: "
        + ("; ".join(f"{r}: {anomaly_text(a)}" for r, a in ev["open_anomalies"].items()) or "none open"),
        f"- Evidence: {evidence_text(ev)}",
        f"- Decision: {decision}",
        f"- Reason: {reason}",
        f"- Next check: {ev['next_check']}",
        "",
        *extra_fields(ev, decision),
    ]
    if ev.get("final_summary"):
        lines += ["", ev["final_summary"]]
    metrics = ev["recent_metrics"][-METRICS_IN_REPORT:]
    lines += ["", "### Recent metrics", ""]
    if metrics:
        names = sorted({k for m in metrics for k in m if k not in ("ts", "id")}, key=lambda k: (k != "step", k))
        lines.append("| " + " | ".join(names) + " |")
        lines.append("|" + "---|" * len(names))
        lines.extend("| " + " | ".join(fmt(m.get(n, "")) for n in names) + " |" for m in metrics)
    else:
        lines.append("(no metrics recorded)")
    tail = ev["log_tail"] or ["(no log lines recorded)"]
    lines += ["", "### Last log lines", "", "```", *tail, "```", ""]
    return "\n".join(lines)


def extra_fields(ev: dict[str, Any], decision: str) -> list[str]:
    """trainwarden's fields, below the method's eight: what they are based on."""
    acted = ev["decision"] in (t.STOP, t.WAIT)
    severity = f" ({ev['severity']})" if ev.get("severity") else ""
    no_remedy = "see the open anomalies" if ev["open_anomalies"] else "nothing to do"
    lines = [
        f"- Source: {ev['source']}",
        f"- Rule: {said(ev['rule'], 'manual' if acted else 'none fired')}{severity}",
        f"- Remedy: {said(ev['remedy'], 'none given by the policy' if acted else no_remedy)}",
    ]
    if ev["decision"] != decision:
        recorded = f"{ev['decision']} ({said(ev['reason'], 'no reason recorded')})" if ev["decision"] else "none"
        lines.append(f"- Recorded decision: {recorded}")
    if ev.get("decision_event") is not None:
        lines.append(f"- Policy: {said(ev['policy'], 'not recorded')}; trigger event "
                     f"{said(ev['trigger_event'], 'not recorded')}; decision event {ev['decision_event']}")  # fmt: skip
    return lines

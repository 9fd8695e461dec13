"""Evidence packs: why a run was stopped, in a form a person can read on their own later.

`build_pack` is pure (state + decision -> JSON and Markdown); `write_pack` is the only I/O and is
safe to repeat: the directory name comes from the decision, and files are replaced atomically.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from events.envelope import Event
from events.projection import RunState
from events.redact import redact

METRICS_IN_REPORT = 10


@dataclass(frozen=True, slots=True)
class Pack:
    relative_dir: str
    evidence: dict[str, Any]
    report: str


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def build_pack(*, state: RunState, decision: Event, log_tail: list[str], files_inspected: list[str]) -> Pack:
    data = decision.data
    rule = data.get("rule") or "manual"
    decided = _utc(decision.ts)
    evidence = json_safe(
        redact(
            {
                "run": decision.run,
                "host": data.get("run_host") or state.host,
                "decision": data.get("decision"),
                "rule": rule,
                "reason": data.get("reason"),
                "severity": data.get("severity"),
                "remedy": data.get("remedy"),
                "offending_values": data.get("values", {}),
                "trigger_event": data.get("trigger"),
                "decision_event": decision.id,
                "policy": data.get("policy"),
                "decided_at": decided.isoformat(),
                "status": state.status,
                "step": state.step,
                "last_metrics": state.last_metrics,
                "recent_metrics": list(state.recent_metrics),
                "open_anomalies": state.open_anomalies,
                "log_tail": log_tail,
                "config": state.launch,
                "wandb_url": state.launch.get("wandb_url"),
                "data_source": state.source or "log_fallback",
                "files_inspected": files_inspected,
            }
        )
    )
    return Pack(
        relative_dir=f"{decision.run}/{decided:%Y%m%dT%H%M%SZ}-{rule}",
        evidence=evidence,
        report=render_report(evidence),
    )


def json_safe(value: Any) -> Any:
    """Strict JSON for files people open with other tools: NaN/Inf become the strings 'nan'/'inf'/'-inf'."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return str(value) if not math.isfinite(value) else f"{value:.6g}"
    return str(value)


def render_report(ev: dict[str, Any]) -> str:
    """The training-check report format, as Markdown."""
    metrics = ev["recent_metrics"][-METRICS_IN_REPORT:]
    names = sorted({k for m in metrics for k in m if k not in ("ts", "id")}, key=lambda k: (k != "step", k))
    lines = [
        f"## Training Check - {ev['decided_at']}",
        "",
        f"- **Data source**: {ev['data_source']}",
        f"- **Run**: {ev['run']} on {ev['host']} (step {ev['step']})",
        f"- **Decision**: {ev['decision']}",
        f"- **Rule**: {ev['rule']} ({ev['severity']})",
        f"- **Reason**: {ev['reason']}",
        f"- **Remedy**: {ev['remedy']}",
        "",
        "### Recent metrics",
        "",
    ]
    if metrics:
        lines.append("| " + " | ".join(names) + " |")
        lines.append("|" + "---|" * len(names))
        lines.extend("| " + " | ".join(_fmt(m.get(n, "")) for n in names) + " |" for m in metrics)
    else:
        lines.append("(no metrics recorded)")
    lines += ["", "### Anomalies", ""]
    lines += [f"- {rule}: {a.get('reason')} ({a.get('severity')})" for rule, a in ev["open_anomalies"].items()] or [
        "(none open)"
    ]
    lines += ["", "### Evidence", "", f"- Offending values: {json.dumps(ev['offending_values'])}"]
    lines.append(f"- Trigger event: {ev['trigger_event']}; decision event: {ev['decision_event']}")
    lines.append(f"- Policy: {ev['policy']}")
    if ev["wandb_url"]:
        lines.append(f"- W&B: {ev['wandb_url']}")
    lines += [f"- File inspected: {f}" for f in ev["files_inspected"]]
    lines += ["", "### Last log lines", "", "```", *ev["log_tail"], "```", ""]
    lines += ["### Next check", "", "None: the run is being stopped.", ""]
    return "\n".join(lines)


def write_pack(root: Path, pack: Pack) -> Path:
    """Write `evidence.json` and `report.md` under root/<run>/<time>-<rule>/; returns that directory."""
    target = root / pack.relative_dir
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".pack-", dir=target.parent))
    (tmp / "evidence.json").write_text(json.dumps(pack.evidence, indent=2, default=str, allow_nan=False) + "\n")
    (tmp / "report.md").write_text(pack.report)
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    return target


def read_log_tail(path: str | None, *, lines: int = 30, max_bytes: int = 64 * 1024) -> list[str]:
    """The last lines of a local log file, or [] when it is not readable from here."""
    if not path:
        return []
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]

"""After runs (the procedure's Step 6): write the project's record files from the event log.

Under `--out` (the project root): `training/runs.yaml` (one entry per launch, refused launches apart),
`training/checkpoints.yaml` (saved, kept, deleted, best), the `training_status` key of `status.yaml`
(other keys kept) and a section per ended launch appended to `findings.md` (once: a marker names the
launch). What to write comes from `collect_facts` (pure); this module reads the log and writes files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from trainwarden.core.words import said
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.store import EventStore, Malformed
from trainwarden.remote.collect_facts import BestBy, Facts, collect_facts, iso, overall_status
from trainwarden.remote.errors import WandbUnreachable
from trainwarden.remote.final_metrics import NEEDS, FinalMetrics
from trainwarden.remote.plan import PLAN_PREFIX

FINDINGS = "findings.md"
ENDED = ("finished", "failed", "stopped")


def is_run(name: str) -> bool:
    """A training run's log, not the installation's (SYSTEM_RUN) nor a plan's (`plan-NAME`)."""
    return name != t.SYSTEM_RUN and not name.startswith(PLAN_PREFIX)


def read_logs(store: EventStore, runs: Sequence[str] | None = None) -> dict[str, list[Event]]:
    names = [n for n in runs or sorted(name for name, _ in store.runs()) if is_run(n)]
    return {name: [e for _, e in store.iter_run(name) if not isinstance(e, Malformed)] for name in names}


def with_final_metrics(entries: list[dict[str, Any]], source: FinalMetrics | None) -> None:
    """Final metrics from W&B where it answers; the log's otherwise, with the reason said."""
    if source is None:
        return
    for entry in entries:
        wandb = entry.get("wandb")
        if not wandb or entry["status"] not in ENDED:
            continue
        try:
            metrics = source.final(wandb)
        except WandbUnreachable as exc:
            entry["wandb_pull"] = f"unreachable ({NEEDS}): {exc}"
            continue
        entry["final_metrics"], entry["metrics_source"], entry["wandb_pull"] = metrics, source.name, "ok"


def findings_section(entry: Mapping[str, Any]) -> str:
    metrics = ", ".join(f"{k}={v}" for k, v in sorted(entry["final_metrics"].items())) or "none recorded"
    why = entry.get("reason") or entry.get("failure") or entry.get("stopped_by")
    ckpt = entry.get("checkpoints") or {}
    lines = [
        f"## {entry['run']} (launch {entry['launch']}, attempt {entry['attempt']}): {entry['status']}",
        marker(entry),
        "",
        f"- Launched: {entry['launched_at']} on {said(entry['server'])}"
        + (f", plan {entry['plan']}" if entry.get("plan") else ""),
        f"- Ended: {said(entry['ended_at'], 'not recorded')}, step {said(entry['step'])}",
        f"- Decision: {entry['decision']}" + (f" ({entry['rule']}: {why})" if entry.get("rule") else
                                               f" ({why})" if why else ""),
        f"- Final metrics ({entry['metrics_source']}): {metrics}",
        f"- Best checkpoint: {said(ckpt.get('best'), 'none')} ({ckpt.get('best_by', '')})",
    ]  # fmt: skip
    if entry.get("evidence"):
        lines.append(f"- Evidence: {', '.join(entry['evidence'])}")
    return "\n".join([*lines, ""])


def marker(entry: Mapping[str, Any]) -> str:
    return f"<!-- trainwarden collect {entry['run']} {entry['launch_event']} -->"


def append_findings(path: Path, entries: Sequence[Mapping[str, Any]]) -> int:
    """Append a section for each ended launch the file does not hold yet; how many were appended."""
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    new = [e for e in entries if e["status"] in ENDED and marker(e) not in existing]
    if not new:
        return 0
    with open(path, "a", encoding="utf-8") as f:
        if existing and not existing.endswith("\n\n"):
            f.write("\n" if existing.endswith("\n") else "\n\n")
        f.write("\n".join(findings_section(e) for e in new))
    return len(new)


def write(facts: Facts, out: Path) -> list[Path]:
    training = out / "training"
    training.mkdir(parents=True, exist_ok=True)
    runs_path, ckpt_path, status_path = training / "runs.yaml", training / "checkpoints.yaml", out / "status.yaml"
    runs_path.write_text(yaml.safe_dump({"runs": facts.entries, "refused": facts.refused}, sort_keys=False))
    ckpt_path.write_text(yaml.safe_dump({"checkpoints": facts.checkpoints}, sort_keys=False))
    status = yaml.safe_load(status_path.read_text()) if status_path.exists() else None
    status = status if isinstance(status, dict) else {}
    overall, latest = overall_status(facts.entries)
    status["training_status"] = {"overall": overall, "runs": latest,
                                 "refused": sorted({r["run"] for r in facts.refused} - set(latest)),
                                 "updated": iso(datetime.now(UTC).timestamp())}  # fmt: skip
    status_path.write_text(yaml.safe_dump(status, sort_keys=False))
    append_findings(out / FINDINGS, facts.entries)
    return [runs_path, ckpt_path, status_path, out / FINDINGS]


def collect(
    store: EventStore,
    *,
    out: Path,
    runs: list[str] | None = None,
    best_by: Mapping[str, BestBy] | None = None,
    metrics: FinalMetrics | None = None,
) -> list[Path]:
    facts = collect_facts(read_logs(store, runs), best_by)
    with_final_metrics(facts.entries, metrics)
    return write(facts, out)

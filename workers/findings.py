"""The project's findings file: one dated note per STOP, appended once (a retried action adds nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainwarden.core.metrics import at_step
from trainwarden.core.words import said


def marker(decision_id: str) -> str:
    return f"<!-- trainwarden decision {decision_id} -->"


def findings_note(ev: dict[str, Any], *, pack_dir: Path) -> str:
    when = utc_text(ev["decided_at"])
    return "\n".join([
        f"## {when}: {ev['run']} stopped by {ev['rule']}",
        marker(ev["decision_event"]),
        "",
        f"- Reason: {said(ev['reason'], 'not recorded')}",
        f"- Remedy: {said(ev['remedy'], 'none given by the policy')}",
        f"- Run: {ev['run']} on {said(ev['host'], 'an unknown host')}, {at_step(ev['step'])}",
        f"- Evidence: {pack_dir}",
        f"- Policy: {said(ev['policy'], 'not recorded')}",
        "",
    ])  # fmt: skip


def utc_text(iso: str) -> str:
    return iso.replace("T", " ")[:16] + " UTC"


def append_note(path: Path, note: str, *, decision_id: str) -> bool:
    """Append `note` unless the file already holds this decision's note; True when written."""
    try:
        existing = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        existing = ""
    if marker(decision_id) in existing:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        if existing and not existing.endswith("\n\n"):
            f.write("\n" if existing.endswith("\n") else "\n\n")
        f.write(note)
    return True

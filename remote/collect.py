"""After runs (the seed's Step 6): write the project's record files from the event log.

`training/runs.yaml` (one entry per run: status, attempts, final metrics, W&B name, evidence),
`training/checkpoints.yaml` (saved and deleted checkpoints) and the `training_status` key of
`status.yaml` (other keys there are kept). Final metrics come from the log; the W&B run summary
is not fetched (no network access is assumed).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import yaml
from trainwarden.events import types as t
from trainwarden.events.codec import json_safe
from trainwarden.events.payloads import CheckpointDeletedData
from trainwarden.events.projection import fold
from trainwarden.events.store import EventStore, Malformed
from trainwarden.remote.plan import PLAN_PREFIX


def _iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds") if ts else None


def collect(store: EventStore, *, out: Path, runs: list[str] | None = None) -> list[Path]:
    names = runs or sorted(name for name, _ in store.runs() if not name.startswith(PLAN_PREFIX))
    run_entries: list[dict[str, Any]] = []
    checkpoints: dict[str, dict[str, list[Any]]] = {}
    for name in names:
        events = [e for _, e in store.iter_run(name) if not isinstance(e, Malformed)]
        state = fold(events)
        launch = state.launch
        run_entries.append(json_safe({
            "run": name,
            "status": state.status,
            "server": launch.get("server") or state.host or None,
            "attempts": launch.get("attempt", 1 if launch else 0),
            "launched_at": _iso(state.first_ts),
            "last_event_at": _iso(state.last_ts),
            "step": state.step,
            "final_metrics": {k: v for k, v in state.last_metrics.items() if k != "step"},
            "metrics_source": "log",
            "decision": state.decision,
            "wandb": launch.get("wandb"),
            "evidence": list(state.evidence),
            "plan": launch.get("plan"),
        }))  # fmt: skip
        saved = [e.data for e in events if e.type == t.CHECKPOINT_SAVED]
        deleted = [cast(CheckpointDeletedData, e.data).get("path") for e in events if e.type == t.CHECKPOINT_DELETED]
        if saved or deleted:
            checkpoints[name] = {"saved": json_safe(saved), "deleted": deleted}
    training = out / "training"
    training.mkdir(parents=True, exist_ok=True)
    written = [training / "runs.yaml", training / "checkpoints.yaml", out / "status.yaml"]
    written[0].write_text(yaml.safe_dump({"runs": run_entries}, sort_keys=False))
    written[1].write_text(yaml.safe_dump({"checkpoints": checkpoints}, sort_keys=False))
    status_path = written[2]
    status = yaml.safe_load(status_path.read_text()) if status_path.exists() else None
    status = status if isinstance(status, dict) else {}
    statuses = {e["run"]: e["status"] for e in run_entries}
    overall = ("failed" if any(s == "failed" for s in statuses.values())
               else "running" if any(s in ("launched", "running", "stopping") for s in statuses.values())
               else "done")  # fmt: skip
    status["training_status"] = {"overall": overall, "runs": statuses, "updated": _iso(datetime.now(UTC).timestamp())}
    status_path.write_text(yaml.safe_dump(status, sort_keys=False))
    return written

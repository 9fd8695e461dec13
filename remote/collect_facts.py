"""What happened, read from the event logs: one entry per launch, refused launches, checkpoints. Pure.

`collect` (remote/collect.py) writes these to the project's files. A run's log holds every launch of its
experiment (a plan's, a resume's, a second plan's), so the log is split at each `run.launched`: each
launch is folded on its own, and an end recorded late (after the next launch) goes back to its launch by
its `launch` seq. Refusals (`launch.refused`) are facts about a launch that never happened: they are
listed apart, never as runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.codec import json_safe
from trainwarden.events.envelope import Event
from trainwarden.events.projection import fold, is_finite_number

NO_DECISION = "none"  # a run no rule decided (a failure the policy did not act on)


@dataclass(frozen=True, slots=True)
class BestBy:
    """How an experiment ranks its checkpoints (its `checkpoints.best_metric` and `mode`)."""

    metric: str
    mode: str = "min"


@dataclass(slots=True)
class Facts:
    entries: list[dict[str, Any]] = field(default_factory=list)  # one per launch, in launch order
    refused: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: dict[str, dict[str, Any]] = field(default_factory=dict)  # run -> saved, kept, deleted, best


def iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds") if ts else None


def split_launches(events: Sequence[Event]) -> tuple[list[Event], list[tuple[Event, list[Event]]]]:
    """(events before the first launch, [(run.launched, the events of that launch)])."""
    before: list[Event] = []
    launches: list[tuple[Event, list[Event]]] = []
    by_seq: dict[int, list[Event]] = {}
    for event in events:
        if event.type == t.RUN_LAUNCHED:
            launches.append((event, [event]))
            by_seq[event.seq] = launches[-1][1]
            continue
        if not launches:
            before.append(event)
            continue
        of = cast(p.RunEndedData, event.data).get("launch") if event.type in (t.RUN_FINISHED, t.RUN_FAILED) else None
        target = by_seq.get(of) if type(of) is int else None
        (target if target is not None else launches[-1][1]).append(event)
    return before, launches


def _decision(state_status: str, events: list[Event], fold_decision: str | None) -> dict[str, Any]:
    """What decided the launch: the STOP that stopped it, the failure that ended it (`none`: no rule
    acted), else the latest decision. A failed or stopped run is never said to be CONTINUE."""
    decisions = [cast(p.DecisionData, e.data) for e in events if e.type == t.DECISION]
    stops = [d for d in decisions if d.get("decision") == t.STOP]
    if state_status in ("failed", "stopped") and stops:
        last = stops[-1]
        return {"decision": t.STOP, "rule": last.get("rule"), "reason": last.get("reason")}
    if state_status == "failed":
        ended = next((e for e in reversed(events) if e.type == t.RUN_FAILED), None)
        return {"decision": NO_DECISION, "failure": failure_cause(ended)}
    if state_status == "stopped":
        asked = next((e for e in reversed(events) if e.type == t.STOP_REQUESTED), None)
        data = cast(p.StopRequestedData, asked.data) if asked is not None else p.StopRequestedData()
        who = " ".join(str(v) for v in (data.get("by"), data.get("user")) if v)
        return {"decision": NO_DECISION, "stopped_by": who or "a stop request"}
    if fold_decision is None:
        return {"decision": NO_DECISION}
    latest = decisions[-1] if decisions else None
    return {"decision": fold_decision, "rule": latest and latest.get("rule"),
            "reason": latest and latest.get("reason")}  # fmt: skip


def failure_cause(ended: Event | None) -> str:
    if ended is None:
        return "failed (no run.failed recorded)"
    data = cast(p.RunEndedData, ended.data)
    code = data.get("exit_code")
    cause = "gone without an exit code" if code is None else f"exit code {code}"
    reason = data.get("reason")
    return f"{cause}: {reason}" if reason else cause


def _saved(events: Iterable[Event]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for e in events:
        if e.type != t.CHECKPOINT_SAVED:
            continue
        data = cast(p.CheckpointSavedData, e.data)
        if data.get("path"):
            item: dict[str, Any] = {"path": data["path"], "at": iso(e.ts)}
            if is_finite_number(data.get("metric")):
                item["metric"] = data["metric"]
            out.append(item)
    return out


def best_of(saved: Sequence[Mapping[str, Any]], best_by: BestBy | None) -> tuple[str | None, str]:
    """(the best checkpoint's path, how it was chosen or why none was)."""
    if best_by is None:
        return None, "unknown: the experiment's checkpoints.best_metric is not known"
    scored = [s for s in saved if is_finite_number(s.get("metric"))]
    if not scored:
        return None, f"unknown: no checkpoint.saved carries {best_by.metric}"
    pick = (min if best_by.mode == "min" else max)(scored, key=lambda s: s["metric"])
    return pick["path"], f"{best_by.mode} {best_by.metric} = {pick['metric']}"


def _launch_entry(run: str, attempt_no: int, launched: Event, events: list[Event], *,
                  best_by: BestBy | None, deleted: set[str]) -> dict[str, Any]:  # fmt: skip
    state = fold(events)
    launch = cast(p.RunLaunchedData, launched.data)
    ended = next((e for e in reversed(events) if e.type in (t.RUN_FINISHED, t.RUN_FAILED, t.STOP_DONE)), None)
    saved = _saved(events)
    kept = [s["path"] for s in saved if s["path"] not in deleted]
    best, best_note = best_of([s for s in saved if s["path"] in kept], best_by)
    skipped = [cast(p.ResumeSkippedData, e.data).get("reason") for e in events if e.type == t.RESUME_SKIPPED]
    wandb = launch.get("wandb")
    entry: dict[str, Any] = {
        "run": run,
        "launch": attempt_no,  # the n-th launch of this run in the log
        "launch_event": launched.id,
        "attempt": launch.get("attempt", 1),  # 1, then n+1 for the n-th automatic resume
        "resume": bool(launch.get("resume")),
        "plan": launch.get("plan"),
        "requested_by": launch.get("requested_by"),
        "server": launch.get("server") or launch.get("host") or launched.host,
        "gpus": launch.get("gpus"),
        "launched_at": iso(launched.ts),
        "ended_at": iso(ended.ts) if ended is not None and state.status in ("finished", "failed", "stopped") else None,
        "status": state.status,
        **_decision(state.status, events, state.decision),
        "step": state.step,
        "final_metrics": {k: v for k, v in state.last_metrics.items() if k not in ("step", "epoch")},
        "metrics_source": "log",
        "wandb": dict(wandb) if wandb else None,
        "evidence": list(state.evidence),
        "checkpoints": {"saved": [s["path"] for s in saved], "kept": kept, "best": best, "best_by": best_note},
    }
    if skipped:
        entry["resume_skipped"] = skipped[-1]
    return cast(dict[str, Any], json_safe(entry))


def _refusal(event: Event) -> dict[str, Any]:
    if event.type == t.LAUNCH_FAILED:
        failed = cast(p.LaunchFailedData, event.data)
        return {"run": event.run, "server": failed.get("server"), "at": iso(event.ts), "check": "launch",
                "reason": failed.get("error"), "by": failed.get("user")}  # fmt: skip
    refused = cast(p.LaunchRefusedData, event.data)
    return {"run": event.run, "server": refused.get("server"), "at": iso(event.ts), "check": refused.get("check"),
            "reason": refused.get("reason")}  # fmt: skip


def collect_facts(logs: Mapping[str, Sequence[Event]], best_by: Mapping[str, BestBy] | None = None) -> Facts:
    """Run name -> its events (system and plan streams already left out) -> the facts to write."""
    facts = Facts()
    for run, events in logs.items():
        deleted_events = [cast(p.CheckpointDeletedData, e.data) for e in events if e.type == t.CHECKPOINT_DELETED]
        deleted = {d.get("path", "") for d in deleted_events}
        facts.refused += [_refusal(e) for e in events if e.type in (t.LAUNCH_REFUSED, t.LAUNCH_FAILED)]
        _, launches = split_launches(events)
        ranked = (best_by or {}).get(run)
        entries = [_launch_entry(run, n, launched, seg, best_by=ranked, deleted=deleted)
                   for n, (launched, seg) in enumerate(launches, start=1)]  # fmt: skip
        facts.entries += entries
        saved = _saved(events)
        if saved or deleted_events:
            kept = [s for s in saved if s["path"] not in deleted]
            best, note = best_of(kept, ranked)
            facts.checkpoints[run] = cast(dict[str, Any], json_safe({
                "saved": saved,
                "kept": [s["path"] for s in kept],
                "best": best,
                "best_by": note,
                "deleted": [{"path": d.get("path"), "reason": d.get("reason")} for d in deleted_events],
            }))  # fmt: skip
    facts.entries.sort(key=lambda e: (e["launched_at"] or "", e["run"], e["launch"]))
    facts.refused.sort(key=lambda r: (r["at"] or "", r["run"]))
    return facts


def overall_status(entries: Sequence[Mapping[str, Any]]) -> tuple[str, dict[str, str]]:
    """(overall, run -> the status of its latest launch): a run that failed and was then launched
    again and finished counts as finished; only the latest launch of each run decides."""
    latest: dict[str, str] = {}
    for entry in entries:  # in launch order: the last one wins
        latest[entry["run"]] = entry["status"]
    statuses = set(latest.values())
    overall = ("running" if statuses & {"launched", "running", "stopping"}
               else "failed" if "failed" in statuses
               else "stopped" if "stopped" in statuses
               else "done" if statuses else "none")  # fmt: skip
    return overall, latest

"""Checkpoint retention (the seed's policy): keep the latest, the best and the milestones.

`plan_retention` is pure. Rules, in order of strength:
- never delete a file whose name says best, latest or last (`best.pt`, `latest.pt`, ultralytics'
  `last.pt`, Lightning's `last.ckpt`, `model_best.pth`): the names labs and trainers keep by, which
  carry no number for the rules below to rank;
- never delete the best checkpoint, nor the only one, nor (unless the run failed) the newest file;
- with the best unknown (no metric in the names, no file named best), keep every file that is not
  provably a plain intermediate (a file named with no epoch or step);
- a finished or running run keeps its latest, its best and its milestone epochs;
- a failed run keeps its logs, metrics and config but loses its weights, except the best (or,
  when no metric says which is best, the latest), so nothing is ever left without a checkpoint.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from trainwarden.remote.fleet import CheckpointConfig, Server
from trainwarden.remote.ssh import RemoteShell

EPOCH_RE = re.compile(r"(?i)(?<![a-z])(?:epoch|ep)[_=-]?(\d+)")
STEP_RE = re.compile(r"(?i)(?<![a-z])(?:step|iter|it)[_=-]?(\d+)")
KEPT_BY_NAME_RE = re.compile(r"(?i)best|(?:^|[_.=-])(?:latest|last)(?:[_.=-]|$)")


@dataclass(frozen=True, slots=True)
class CheckpointFile:
    name: str
    size: int
    mtime: float
    epoch: int | None = None
    step: int | None = None
    metric: float | None = None


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    keep: Mapping[str, tuple[str, ...]]  # name -> why kept
    delete: tuple[str, ...]
    freed_bytes: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


def parse_name(name: str, best_metric: str | None) -> tuple[int | None, int | None, float | None]:
    """(epoch, step, metric) read from a file name like `epoch_25_val_loss=2.31.pt`."""
    epoch = int(m.group(1)) if (m := EPOCH_RE.search(name)) else None
    step = int(m.group(1)) if (m := STEP_RE.search(name)) else None
    metric = None
    if best_metric:
        pattern = re.escape(best_metric) + r"[_=-]?([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
        if m := re.search(pattern, name):
            metric = float(m.group(1))
    return epoch, step, metric


def doomed(status: str | None, stops: Sequence[Mapping[str, object]]) -> bool:
    """Whether retention treats the run as failed (logs, metrics and config kept; weights dropped but the
    best): it failed, or the watchdog stopped it by a rule (a NaN, a divergence), so its latest weights are
    the doomed ones. A run a person stopped with no rule behind it keeps its weights as a finished one."""
    if status == "failed":
        return True
    return status == "stopped" and any(s.get("type") == "stop.requested" and s.get("rule") for s in stops)


def plan_retention(files: Sequence[CheckpointFile], config: CheckpointConfig, *, failed: bool) -> RetentionPlan:
    if not files:
        return RetentionPlan(keep={}, delete=(), notes=("no checkpoints found",))
    keep: dict[str, list[str]] = {}
    order = sorted(files, key=lambda f: (f.step or -1, f.epoch or -1, f.mtime))
    latest = order[-1]
    scored = [(f.metric, f) for f in files if f.metric is not None]
    best = (min if config.mode == "min" else max)(scored, key=lambda pair: pair[0])[1] if scored else None
    named_best = any("best" in f.name.lower() for f in files)
    notes = []
    if best is None and config.best_metric:
        unknown = f"no file name carries {config.best_metric}: best unknown"
        notes.append(unknown + ("" if named_best else "; only numbered intermediates may be deleted"))
    if best is not None:
        keep.setdefault(best.name, []).append(f"best {config.best_metric}={best.metric}")
    for f in files:
        if KEPT_BY_NAME_RE.search(f.name):
            keep.setdefault(f.name, []).append("named best, latest or last: never deleted")
    if best is None and not named_best:
        for f in files:
            if f.epoch is None and f.step is None:
                keep.setdefault(f.name, []).append("best unknown: not a numbered intermediate")
    if failed:
        if best is None:
            keep.setdefault(latest.name, []).append("latest (failed run: weights dropped except one)")
        notes.append("failed run: keeps logs, metrics and config; weights dropped except the best")
    else:
        keep.setdefault(latest.name, []).append("latest")
        newest = max(files, key=lambda f: f.mtime)
        if newest is not latest:
            keep.setdefault(newest.name, []).append("newest file")
        for f in files:
            if f.epoch is not None and f.epoch in config.milestones:
                keep.setdefault(f.name, []).append(f"milestone epoch {f.epoch}")
    delete = tuple(f.name for f in order if f.name not in keep)
    freed = sum(f.size for f in files if f.name in delete)
    return RetentionPlan(keep={k: tuple(v) for k, v in keep.items()}, delete=delete, freed_bytes=freed,
                         notes=tuple(notes))  # fmt: skip


def list_checkpoints(shell: RemoteShell, server: Server, config: CheckpointConfig,
                     metrics: Mapping[str, float] | None = None) -> list[CheckpointFile]:  # fmt: skip
    """Files matching the pattern in the checkpoint dir; `metrics` (name -> value, e.g. from
    `checkpoint.saved` events) win over values parsed from file names."""
    done = shell.run(server, f"find {shlex.quote(config.dir)} -maxdepth 1 -type f -name {shlex.quote(config.pattern)}"
                             " -printf '%f\\t%s\\t%T@\\n'", timeout=60)  # fmt: skip
    out = []
    for line in done.stdout.splitlines():
        name, size, mtime = line.split("\t")
        epoch, step, metric = parse_name(name, config.best_metric)
        if metrics and name in metrics:
            metric = metrics[name]
        out.append(CheckpointFile(name=name, size=int(size), mtime=float(mtime), epoch=epoch, step=step, metric=metric))
    return out


def delete_checkpoints(shell: RemoteShell, server: Server, config: CheckpointConfig, names: Sequence[str]) -> list[str]:
    """Delete `names` (plain file names inside the checkpoint dir); returns those actually gone."""
    safe = [n for n in names if "/" not in n and n not in (".", "..")]
    if not safe:
        return []
    paths = [f"{config.dir.rstrip('/')}/{n}" for n in safe]
    shell.run(server, "rm -f -- " + " ".join(shlex.quote(p) for p in paths), timeout=120)
    left = shell.run(server, "ls -1 -- " + " ".join(shlex.quote(p) for p in paths) + " 2>/dev/null", timeout=60)
    remaining = {line.rsplit("/", 1)[-1] for line in left.stdout.splitlines()}
    return [n for n in safe if n not in remaining]

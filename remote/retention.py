"""Checkpoint retention (the seed's policy): keep the latest, the best and the milestones.

`plan_retention` is pure; a checkpoint is a unit, a file or a whole directory (HF's `checkpoint-N/`), kept
or deleted whole. The best comes, in this order, from the run's own record (HF's trainer_state.json,
Lightning's best_model_path: see layouts.py), from `checkpoint.saved` events, from metric values in names.
Rules, in order of strength:
- a failed run (failed, or stopped by a rule) follows `checkpoints.failed_runs`: the procedure's default
  `no_weights` keeps its logs, metrics and config and deletes every checkpoint; `keep_best` keeps the best
  (or, with the best unknown, the latest) and the names below;
- a run whose record of its best exists but cannot be read (bad JSON, cut short) keeps everything;
- never delete a file whose name says best, latest or last (`best.pt`, `latest.pt`, ultralytics'
  `last.pt`, Lightning's `last.ckpt`, `model_best.pth`), nor what a kept symlink points to;
- never delete the best checkpoint, nor the only one, nor the newest;
- with the best unknown, keep every checkpoint that is not provably a plain intermediate (a name with
  no epoch or step), and say so;
- a finished or running run keeps its latest, its best and its milestone epochs.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from trainwarden.remote.fleet import CheckpointConfig, Server
from trainwarden.remote.layouts import (
    HF_STATE,
    LIGHTNING_KEY,
    STATE_CAP_BYTES,
    RecordedBest,
    hf_best,
    is_hf_dir,
    kept_by_name,
    lightning_best,
    parse_name,
)
from trainwarden.remote.ssh import RemoteShell

LIGHTNING_SCAN_BYTES = 64 << 20  # data.pkl comes first in a .ckpt; the callbacks' state sits in its first MBs


@dataclass(frozen=True, slots=True)
class CheckpointFile:
    name: str
    size: int
    mtime: float
    epoch: int | None = None
    step: int | None = None
    metric: float | None = None
    kind: str = "f"  # find's %y: f a file, d a directory (deleted whole), l a symlink
    target: str | None = None  # a symlink's target


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    keep: Mapping[str, tuple[str, ...]]  # name -> why kept
    delete: tuple[str, ...]
    freed_bytes: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


def failed_reason(status: str | None, stops: Sequence[Mapping[str, object]]) -> str | None:
    """Why retention treats the run as failed, or None: it failed, or the watchdog stopped it by a rule (a
    NaN, a divergence), so its weights are the doomed ones. A run a person stopped with no rule behind it
    keeps its weights as a finished one."""
    if status == "failed":
        return "status failed"
    rules = [str(s["rule"]) for s in stops if s.get("type") == "stop.requested" and s.get("rule")]
    return f"stopped by rule {rules[-1]}" if status == "stopped" and rules else None


def doomed(status: str | None, stops: Sequence[Mapping[str, object]]) -> bool:
    return failed_reason(status, stops) is not None


def failed_run_line(reason: str, config: CheckpointConfig) -> str:
    """The dry run's line saying which rule applies to a failed run, and why."""
    if config.failed_runs == "keep_best":
        return (f"failed run ({reason}): checkpoints.failed_runs is keep_best, so its best (or latest) weights "
                "stay; the procedure's default, no_weights, keeps logs, metrics and config only")  # fmt: skip
    return (f"failed run ({reason}): the procedure keeps logs, metrics and config, no weights; "
            "set checkpoints.failed_runs: keep_best to keep the best")  # fmt: skip


def plan_retention(files: Sequence[CheckpointFile], config: CheckpointConfig, *, failed: bool,
                   record: RecordedBest | None = None) -> RetentionPlan:  # fmt: skip
    if not files:
        return RetentionPlan(keep={}, delete=(), notes=("no checkpoints found",))
    keep: dict[str, list[str]] = {}
    order = sorted(files, key=lambda f: (f.step or -1, f.epoch or -1, f.mtime))
    by_name = {f.name: f for f in files}
    latest = order[-1]
    best, best_why, notes = _best(files, config, record)
    if failed and config.failed_runs == "no_weights":
        notes.append("failed run: no weights kept (checkpoints.failed_runs: no_weights); logs, metrics and config "
                     "stay, they are not in the checkpoint dir")  # fmt: skip
        return _plan(files, order, {}, notes)
    if record is not None and not record.readable:
        return _plan(files, order, {f.name: ["the run's record of its best could not be read"] for f in files}, notes)
    named_best = any("best" in f.name.lower() for f in files)
    if best is not None:
        keep.setdefault(best.name, []).append(best_why)
    elif not named_best:
        notes.append("best unknown: only numbered intermediates may be deleted, everything else is kept")
    for f in files:
        if kept_by_name(f.name):
            keep.setdefault(f.name, []).append("named best, latest or last: never deleted")
    if best is None and not named_best:
        for f in files:
            if f.epoch is None and f.step is None:
                keep.setdefault(f.name, []).append("best unknown: not a numbered intermediate")
    if failed:
        if best is None:
            keep.setdefault(latest.name, []).append("latest (failed run: weights dropped except one)")
        notes.append("failed run: keeps logs, metrics and config; weights dropped except the best "
                     "(checkpoints.failed_runs: keep_best)")  # fmt: skip
    else:
        keep.setdefault(latest.name, []).append("latest")
        newest = max(files, key=lambda f: f.mtime)
        if newest is not latest:
            keep.setdefault(newest.name, []).append("newest file")
        for f in files:
            if f.epoch is not None and f.epoch in config.milestones:
                keep.setdefault(f.name, []).append(f"milestone epoch {f.epoch}")
    for name in list(keep):
        link = by_name[name]
        if link.kind == "l" and link.target and (target := PurePosixPath(link.target).name) in by_name:
            keep.setdefault(target, []).append(f"target of {name}")
    return _plan(files, order, keep, notes)


def _best(files: Sequence[CheckpointFile], config: CheckpointConfig,
          record: RecordedBest | None) -> tuple[CheckpointFile | None, str, list[str]]:  # fmt: skip
    """The best checkpoint and why: the run's record first, then metrics (events win over names)."""
    notes: list[str] = []
    if record is not None:
        found = next((f for f in files if f.name == record.name), None)
        if found is not None:
            return found, f"best per {record.source}", notes
        notes.append(record.note or f"{record.source} names {record.name}, which is not in {config.dir}")
    scored = [f for f in files if f.metric is not None]
    if scored:
        best = (min if config.mode == "min" else max)(scored, key=lambda f: f.metric or 0.0)
        return best, f"best {config.best_metric}={best.metric}", notes
    if config.best_metric:
        notes.append(f"no file name or checkpoint.saved event carries {config.best_metric}: best unknown")
    return None, "", notes


def _plan(files: Sequence[CheckpointFile], order: Sequence[CheckpointFile], keep: Mapping[str, list[str]],
          notes: list[str]) -> RetentionPlan:  # fmt: skip
    delete = tuple(f.name for f in order if f.name not in keep)
    freed = sum(f.size for f in files if f.name in delete)
    return RetentionPlan(keep={k: tuple(v) for k, v in keep.items()}, delete=delete, freed_bytes=freed,
                         notes=tuple(notes))  # fmt: skip


def list_checkpoints(shell: RemoteShell, server: Server, config: CheckpointConfig,
                     metrics: Mapping[str, float] | None = None) -> list[CheckpointFile]:  # fmt: skip
    """The checkpoint dir's entries matching the pattern (files, symlinks, directories) and HF's
    `checkpoint-N/` directories, a directory sized by `du`; `metrics` (name -> value, e.g. from
    `checkpoint.saved` events) win over values parsed from names."""
    d, pat = shlex.quote(config.dir), shlex.quote(config.pattern)
    done = shell.run(server, f"find {d} -mindepth 1 -maxdepth 1 \\( \\( \\( -type f -o -type l \\) -name {pat} \\) -o"
                             f" \\( -type d \\( -name {pat} -o -name 'checkpoint-[0-9]*' \\) \\) \\)"
                             " -printf '%y\\t%f\\t%s\\t%T@\\t%l\\n'", timeout=60)  # fmt: skip
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    rows = [r for r in rows if len(r) == 5 and _plain(r[1])]
    dirs = [r[1] for r in rows if r[0] == "d"]
    sizes: dict[str, int] = {}
    if dirs:
        du = shell.run(server, "du -sb -- " + " ".join(shlex.quote(_path(config, n)) for n in dirs), timeout=120)
        for line in du.stdout.splitlines():
            size, _, path = line.partition("\t")
            if size.isdigit():
                sizes[PurePosixPath(path).name] = int(size)
    out = []
    for kind, name, size, mtime, target in rows:
        epoch, step, metric = parse_name(name, config.best_metric)
        if metrics and name in metrics:
            metric = metrics[name]
        out.append(CheckpointFile(name=name, size=sizes.get(name, int(size)), mtime=float(mtime), epoch=epoch,
                                  step=step, metric=metric, kind=kind, target=target or None))  # fmt: skip
    return out


def read_record(shell: RemoteShell, server: Server, config: CheckpointConfig,
                files: Sequence[CheckpointFile]) -> RecordedBest | None:  # fmt: skip
    """The best as the trainer recorded it: the newest HF `checkpoint-N/trainer_state.json`, or the
    `best_model_path` pickled in Lightning's `last.ckpt` (else the newest `.ckpt`); None for other layouts.
    Read over the shell, size-capped, parsed here; what cannot be read is a note, never a guess."""
    hf = [f for f in files if f.kind == "d" and is_hf_dir(f.name)]
    if hf:
        newest = max(hf, key=lambda f: (f.step or -1, f.mtime))
        source = f"{newest.name}/{HF_STATE}"
        done = shell.run(server, f"head -c {STATE_CAP_BYTES + 1} -- {shlex.quote(_path(config, source))}", timeout=60)
        if not done.ok:
            why = done.stderr.strip() or f"exit status {done.exit_status}"
            return RecordedBest(None, source, f"{source} unreadable ({why}): nothing deleted", readable=False)
        if len(done.stdout.encode()) > STATE_CAP_BYTES:
            return RecordedBest(None, source, f"{source} is over {STATE_CAP_BYTES >> 20} MB: nothing deleted",
                                readable=False)  # fmt: skip
        return hf_best(done.stdout, source)
    ckpts = [f for f in files if f.kind != "d" and f.name.endswith(".ckpt")]
    if not ckpts:
        return None
    last = [f for f in ckpts if f.name == "last.ckpt"]
    pick = last[0] if last else max(ckpts, key=lambda f: (f.step or -1, f.mtime))
    key = LIGHTNING_KEY.decode()
    offset = (
        f'off=$(head -c {LIGHTNING_SCAN_BYTES} -- "$f" | LC_ALL=C grep -a -b -o -m1 {key} | head -n1 | cut -d: -f1)'
    )
    dump = 'tail -c +$((off + 1)) -- "$f" | head -c 4200 | od -An -v -tx1'
    done = shell.run(
        server, f'f={shlex.quote(_path(config, pick.name))}; {offset}; [ -z "$off" ] || {dump}', timeout=120
    )
    try:
        chunk = bytes.fromhex("".join(done.stdout.split()))
    except ValueError:
        chunk = b""
    return lightning_best(chunk, pick.name)


def delete_checkpoints(shell: RemoteShell, server: Server, config: CheckpointConfig,
                       units: Sequence[CheckpointFile]) -> list[str]:  # fmt: skip
    """Delete checkpoints listed in the checkpoint dir, a directory whole (`rm -rf` of a plain name under
    the dir, nothing else); returns the names actually gone."""
    safe = [u for u in units if _plain(u.name)]
    if not safe:
        return []
    files = [shlex.quote(_path(config, u.name)) for u in safe if u.kind != "d"]
    dirs = [shlex.quote(_path(config, u.name)) for u in safe if u.kind == "d"]
    if files:
        shell.run(server, "rm -f -- " + " ".join(files), timeout=120)
    if dirs:
        shell.run(server, "rm -rf -- " + " ".join(dirs), timeout=600)
    paths = " ".join(shlex.quote(_path(config, u.name)) for u in safe)
    left = shell.run(server, f'for p in {paths}; do [ -e "$p" ] || [ -L "$p" ] && echo "$p"; done', timeout=60)
    remaining = {PurePosixPath(line).name for line in left.stdout.splitlines()}
    return [u.name for u in safe if u.name not in remaining]


def _plain(name: str) -> bool:
    """A plain entry name: no path, no parent, nothing a shell or `rm -rf` could read as more."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\n\0")


def _path(config: CheckpointConfig, name: str) -> str:
    return f"{config.dir.rstrip('/')}/{name}"

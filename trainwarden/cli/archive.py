"""`trainwarden archive RUN... | --older-than AGE`: retention without loss (workers/archive.py does the work)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable
from pathlib import Path

from trainwarden import wiring
from trainwarden.archive.archiver import Archiver, ArchiveResult
from trainwarden.archive.record import read_records
from trainwarden.core.errors import TrainwardenError, UnknownRun, UsageError
from trainwarden.core.words import closest
from trainwarden.events import types as t
from trainwarden.ops import render
from trainwarden.policies.durations import duration_problem, parse_duration
from trainwarden.settings import Settings

AGE_HINT = "an age like 30d, 12h, 90m or 3600s"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "archive",
        help="export runs' logs to compressed JSONL files (replayable with `replay --from`), then trim them",
    )
    s.add_argument("runs", nargs="*", metavar="RUN", help="runs to archive")
    s.add_argument("--older-than", metavar="AGE", help=f"every run whose last event is older than AGE ({AGE_HINT})")
    s.add_argument("--dir", type=Path, help="where the files go, one directory per run (default: the settings' "
                   "archive_dir, DATA_DIR/archive)")  # fmt: skip
    s.add_argument("--dry-run", action="store_true", help="say what would be archived; write and trim nothing")
    s.set_defaults(func=cmd_archive)


def parse_age(text: str) -> float:
    """`--older-than AGE` in the one duration grammar (`30d`, `1d12h`, `90m`)."""
    seconds = parse_duration(text)
    if seconds is None:
        raise UsageError(f"--older-than: {duration_problem(text, expected=AGE_HINT)}")
    if seconds <= 0:
        raise UsageError(f"--older-than {text!r}: an age is more than 0s; expected {AGE_HINT}")
    return seconds


def old_runs(runs: Iterable[tuple[str, float]], *, cutoff: float) -> list[str]:
    """Pure: runs whose last event is before `cutoff`, oldest first. The reserved system run is left out:
    `replay --verify` reads the policy texts recorded there (name it explicitly to archive it)."""
    return [run for run, ts in sorted(runs, key=lambda p: p[1]) if ts < cutoff and run != t.SYSTEM_RUN]


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def cmd_archive(args: argparse.Namespace, settings: Settings) -> int:
    if bool(args.runs) == bool(args.older_than):
        raise UsageError("name the RUNs to archive, or give --older-than AGE (one of the two)")
    store = wiring.store(settings)
    root = (args.dir or settings.archive_dir).resolve()
    known = dict(store.runs())
    verb = "Would archive" if args.dry_run else "Archiving"
    if args.older_than:
        age = parse_age(args.older_than)
        cutoff = time.time() - age
        runs = old_runs(known.items(), cutoff=cutoff)
        print(f"{verb} {len(runs)} of {len(known)} runs whose last event is older than {args.older_than} "
              f"(before {render.fmt_ts(cutoff)}) into {root}", flush=True)  # fmt: skip
    else:
        runs = list(dict.fromkeys(args.runs))
        for run in runs:
            if run not in known and not read_records(store.redis, store.keys, run):
                raise UnknownRun(run, meant=closest(run, known))
        print(f"{verb} {len(runs)} run(s) into {root}", flush=True)
    archiver = Archiver(store, root, host=settings.host, progress=lambda line: print(f"  {line}", flush=True))
    failed = entries = written = 0
    for run in runs:
        try:
            result = archiver.archive(run, dry_run=args.dry_run)
        except TrainwardenError as exc:
            failed += 1
            print(f"{run}: error: {exc}", flush=True)
            continue
        entries += result.count
        written += result.size
        for line in result_lines(result):
            print(line, flush=True)
    if len(runs) > 1 or args.older_than:
        done = "would archive" if args.dry_run else "archived"
        summary = f"{done} {entries:,} entries from {len(runs) - failed} run(s)"
        print(f"Done: {summary}" + ("" if args.dry_run else f", {fmt_bytes(written)} written")
              + (f"; {failed} failed (nothing was trimmed for those)" if failed else ""))  # fmt: skip
    return 1 if failed else 0


def result_lines(r: ArchiveResult) -> list[str]:
    """What one run's archive did, for people: entries, bytes, ratio, and why it stopped where it did."""
    lines = [f"{r.run}: {note}" for note in r.notes]
    if r.dry_run:
        would = f"would archive {r.count:,} entries ({r.first}..{r.last}); {r.remaining:,} stay in the log"
        lines.append(f"{r.run}: {would if r.count else 'nothing to archive'}")
    elif r.path is None:
        lines.append(f"{r.run}: nothing to archive" + ("" if r.remaining or r.held_by else " (its log is empty)"))
    else:
        undecodable = f", {r.malformed} undecodable kept raw" if r.malformed else ""
        lines.append(f"{r.run}: archived {r.count:,} entries{undecodable} ({r.first}..{r.last}) -> {r.path}")
        lines.append(f"{r.run}: {fmt_bytes(r.size)} ({fmt_bytes(r.raw_bytes)} of JSON, {r.ratio:.1f}x); log trimmed "
                     f"by {r.trimmed:,}, {r.remaining:,} entries left")  # fmt: skip
    if r.held_by is not None:
        where = f"{'after' if r.held_by.inclusive else 'before'} {r.held_by.sid}"
        lines.append(f"{r.run}: stopped early, {where}: {r.held_by.why}; the later entries stay in the log "
                     f"(held for {r.held_by.who})")  # fmt: skip
    return lines

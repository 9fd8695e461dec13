"""A run's whole history: its archived files first, then what is left of its log in Redis.

`replay`, `check` and `policy backtest --run` read a run through here, so a run whose head was
archived reads as if it never was. The files come from `--from` (files or directories) or,
without it, from the records `trainwarden archive` left in Redis, where the files exist on this
machine. The stream is read strictly after the last archived id, so a file whose trim never
happened (an archive that died) counts its entries once. Whatever cannot be found is said in
`notes`, never silently skipped; an archive that trims the log during the read makes the read start over
(failpoint `history-before-stream` pauses a reader there for the test).
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainwarden.archive.errors import ArchiveNotFound, HistoryIncomplete
from trainwarden.archive.file import peek_archive, read_archive
from trainwarden.archive.format import SUFFIX, Entry
from trainwarden.archive.record import ArchiveRecord, read_records
from trainwarden.core.errors import UnknownRun, UsageError
from trainwarden.core.words import closest
from trainwarden.events.errors import StoreUnavailable
from trainwarden.events.faults import pause_point
from trainwarden.events.sids import sid_key
from trainwarden.events.store import EventStore


@dataclass(frozen=True, slots=True)
class History:
    run: str
    entries: list[Entry]
    files: tuple[Path, ...]  # archive files read, oldest entries first
    archived: int  # entries that came from the files
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _File:
    path: Path
    run: str
    first: str | None


def archive_paths(sources: Sequence[Path], run: str | None) -> list[Path]:
    """`--from` arguments -> archive files: a file as is; a directory's `*.jsonl.gz` (or its RUN/ subdirectory's)."""
    out: list[Path] = []
    for source in sources:
        if source.is_dir():
            directory = source / run if run is not None and (source / run).is_dir() else source
            found = sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith((SUFFIX, ".jsonl")))
            if not found:
                hint = " (name the RUN to read its subdirectory)" if run is None and any(directory.iterdir()) else ""
                raise UsageError(f"--from {source}: no archive files (*{SUFFIX}) in {directory}{hint}")
            out.extend(found)
        elif source.is_file():
            out.append(source)
        else:
            raise UsageError(f"--from {source}: no such file or directory")
    return list({p.resolve(): p for p in out}.values())


READS = 3  # tries at a whole read when archives trim the log under it


def load_history(
    store: EventStore | None, run: str | None, sources: Sequence[Path] = (), *, required: bool = True
) -> History:
    """The run's entries in stream order, archives first; `run` may be None when `sources` name it.

    An archive that trims the log while it is read would leave a hole (its file was not among those
    read, its entries are gone from the stream): the records are read again after the stream, and a
    read that misses any recorded entry is done again; HistoryIncomplete names the hole if every try has one.
    """
    holes: list[str] = []
    for _ in range(READS):
        given = [_File(p, *_peek(p)) for p in archive_paths(sources, run)]  # a directory may have gained files
        run = _which_run(run, given)
        history, holes = _read(store, run, given, sources, required=required)
        if not holes:
            return history
    raise HistoryIncomplete(f"archives of {run!r} trimmed its log while it was read, {READS} times in a row: "
                            + "; ".join(holes) + "; run the command again once the archive is done")  # fmt: skip


def _read(
    store: EventStore | None, run: str, given: list[_File], sources: Sequence[Path], *, required: bool
) -> tuple[History, list[str]]:
    """One read of the run, and the holes an archive that committed during it left (none: the read is whole)."""
    files = list(given)
    notes: list[str] = []
    records: list[ArchiveRecord] = []
    if store is not None:
        try:
            records = read_records(store.redis, store.keys, run)
        except StoreUnavailable as exc:
            if not sources:
                raise
            notes.append(f"Redis is unreachable ({exc}): showing the archived entries only")
            store = None
    if not sources:
        files = []
        for record in records:
            path = Path(record.path)
            if path.is_file():
                files.append(_File(path, *_peek(path)))
            else:
                notes.append(_missing(record, given=False))
    files = [f for f in files if f.first is not None]
    files.sort(key=lambda f: sid_key(f.first or "0-0"))
    entries: list[Entry] = []
    for f in files:
        if entries and sid_key(f.first or "0-0") <= sid_key(entries[-1][0]):
            raise UsageError(f"{f.path} starts at {f.first}, inside the archive before it (which ends at "
                             f"{entries[-1][0]}): pass each archive of {run!r} once")  # fmt: skip
        entries.extend(read_archive(f.path))
    archived = len(entries)
    if sources:
        lo, hi = (sid_key(entries[0][0]), sid_key(entries[-1][0])) if entries else (None, None)
        for record in records:
            if lo is None or hi is None or not (lo <= sid_key(record.first) and sid_key(record.last) <= hi):
                notes.append(_missing(record, given=True))
    holes: list[str] = []
    if store is not None:
        pause_point("history-before-stream", store.redis, store.keys)
        after = entries[-1][0] if entries else None
        entries.extend(store.iter_run(run, after=after))
        holes = _holes(read_records(store.redis, store.keys, run), {r.name for r in records}, entries)
    if not entries and required and not holes:
        if records:
            raise ArchiveNotFound(f"the log of {run!r} is archived and none of its files is here: " + "; ".join(notes))
        raise UnknownRun(run, meant=closest(run, (name for name, _ in store.runs())) if store is not None else None)
    history = History(run=run, entries=entries, files=tuple(f.path for f in files), archived=archived,
                      notes=tuple(notes))  # fmt: skip
    return history, holes


def _holes(records: list[ArchiveRecord], known: set[str], entries: list[Entry]) -> list[str]:
    """The entries of archives recorded during the read (not in `known`) that the read has not got."""
    new = [record for record in records if record.name not in known]
    if not new:
        return []  # the usual read: no archive committed during it
    keys = [sid_key(sid) for sid, _ in entries]
    holes = []
    for record in new:
        got = bisect_right(keys, sid_key(record.last)) - bisect_left(keys, sid_key(record.first))
        if got < record.count:
            holes.append(f"entries {record.first}..{record.last} ({record.count - got} of {record.count}, archived "
                         f"to {record.path} during the read) are missing")  # fmt: skip
    return holes


def _peek(path: Path) -> tuple[str, str | None]:
    header, first = peek_archive(path)
    return header.run, first


def _which_run(run: str | None, files: list[_File]) -> str:
    if run is not None:
        for f in files:
            if f.run != run:
                raise UsageError(f"{f.path} is an archive of run {f.run!r}, not {run!r}")
        return run
    runs = sorted({f.run for f in files})
    if not runs:
        raise UsageError("name a RUN, or archive files with --from FILE")
    if len(runs) > 1:
        raise UsageError(f"the --from files hold several runs ({', '.join(runs)}); name the RUN to replay")
    return runs[0]


def _missing(record: ArchiveRecord, *, given: bool) -> str:
    what = f"entries {record.first}..{record.last} ({record.count}) were archived to {record.path}"
    where = f" on {record.host} at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(record.archived_at))}"
    if given:
        return f"{what}{where}, not among the --from files: they are missing here (pass that file with --from too)"
    return f"{what}{where}, which is not on this machine: they are missing here (copy it and pass --from FILE)"

"""Archiving: move the head of a run's log into a compressed file, then trim it, losing nothing.

Steps, each one safe to die after (failpoints `archive-mid-write`, `archive-before-rename`,
`archive-before-trim`, `archive-after-trim` let the kill -9 tests prove it):

0. Take the run's archive lease (workers/archive_lease.py): one archive of a run at a time.
1. Clean up after a dead archive: its partial file goes; a final file with no record in Redis
   holds entries that are still in the stream (the record is written with the trim), so it goes
   too, and is written again below.
2. Bound: the tightest hold (workers/archive_holds.py); entries after it stay in the stream.
3. Write the entries from the stream's start to the bound into a partial file, fsync it.
4. Rename it to `<first>_<last>.jsonl.gz` and fsync the directory.
5. Read the file back: it must hold exactly the entries read from the stream.
6. Bring the readers' view of the run (events/run_view.py) up to the stream's end, so it has folded
   every entry the trim removes.
7. Trim the stream exactly up to the last of them and record the file, in one script
   (events/archive_record.py), which refuses if the stream's head moved or the lease was lost.

So the stream and the recorded files together hold every entry exactly once at every moment, and
an archive run again after a crash redoes the work from the stream.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainwarden.archive.errors import ArchiveFormatError, ArchiveVerifyFailed, ArchiveWriteFailed
from trainwarden.archive.file import PARTIAL_GLOB, ArchiveSummary, ArchiveWriter, scan_archive
from trainwarden.archive.format import archive_name, parse_archive_name
from trainwarden.archive.holds import Hold, read_checkpoint_holds, read_feed_holds, tightest
from trainwarden.archive.lease import ArchiveLease
from trainwarden.archive.record import ArchiveRecord, commit_archive, read_records
from trainwarden.events import run_view
from trainwarden.events.faults import failpoint
from trainwarden.events.history import newest_first, oldest_first
from trainwarden.events.lease import process_alive
from trainwarden.events.store import EventStore, next_id

FAILPOINTS = ("archive-mid-write", "archive-before-rename", "archive-before-trim", "archive-after-trim")
PROGRESS_EVERY = 100_000  # entries between progress lines
LEASE_EVERY = 10_000  # entries between renewals of the archive lease


@dataclass(frozen=True, slots=True)
class ArchiveResult:
    """What one archive of one run did (or, with dry_run, would do)."""

    run: str
    path: Path | None  # the file written; None when nothing was archived
    count: int = 0  # entries archived
    malformed: int = 0  # of which undecodable (kept with their raw fields)
    first: str | None = None
    last: str | None = None
    raw_bytes: int = 0  # the JSON lines, uncompressed
    size: int = 0  # the file
    trimmed: int = 0  # entries removed from the stream
    remaining: int = 0  # entries left in the stream
    held_by: Hold | None = None  # set when a reader's hold kept entries in the stream
    notes: tuple[str, ...] = field(default_factory=tuple)
    dry_run: bool = False

    @property
    def ratio(self) -> float:
        return self.raw_bytes / self.size if self.size else 0.0


class Archiver:
    """Archives runs of one store into `root/<run>/`. I/O at the edges: Redis through the store, files
    through events/archive_file.py; `progress` receives a line now and then during long work."""

    def __init__(
        self,
        store: EventStore,
        root: Path,
        *,
        host: str,
        clock: Callable[[], float] = time.time,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.root = root.resolve()
        self.host = host
        self.clock = clock
        self.progress = progress or (lambda _line: None)

    def archive(self, run: str, *, dry_run: bool = False) -> ArchiveResult:
        """Archive what is safe of `run`'s log (or, with dry_run, only say what would be)."""
        if dry_run:
            return self._archive(run, None)  # reads only: no lease needed
        lease = ArchiveLease(self.store.redis, self.store.keys.archiving(run), run)
        lease.acquire()
        try:
            return self._archive(run, lease)
        finally:
            lease.release()

    def _archive(self, run: str, lease: ArchiveLease | None) -> ArchiveResult:
        dry_run = lease is None
        run_dir = self.root / run
        redis, keys = self.store.redis, self.store.keys
        records = read_records(redis, keys, run)
        notes = self._clean(run_dir, {r.name for r in records}, run, dry_run=dry_run)
        # The log's end first, then the holds: every entry up to that end has its feed entry already
        # (the append script writes both), so the feed scan below sees what points at it.
        tail = newest_first(redis, keys, run, count=1, what="read a run's log")
        if not tail:
            return ArchiveResult(run=run, path=None, notes=tuple(notes), dry_run=dry_run)
        stream_last = tail[0][0].decode()
        hold = self._hold(run)
        bound = hold.bound if hold is not None else stream_last
        takes_any = bool(oldest_first(redis, keys, run, end=bound, count=1, what="read a run's log"))
        if not takes_any:
            return ArchiveResult(run=run, path=None, held_by=hold, remaining=self.store.length(run),
                                 notes=tuple(notes), dry_run=dry_run)  # fmt: skip
        if lease is None:
            count, first, last = self._count(run, bound)
            held = hold if hold is not None and last != stream_last else None
            remaining = self.store.length(run) - count
            return ArchiveResult(run=run, path=None, count=count, first=first, last=last, held_by=held,
                                 remaining=remaining, notes=tuple(notes), dry_run=True)  # fmt: skip
        summary = self._write(run, run_dir, bound, lease)
        assert summary.first is not None and summary.last is not None
        record = ArchiveRecord(name=summary.path.name, path=str(summary.path), host=self.host, first=summary.first,
                               last=summary.last, count=summary.count, malformed=summary.malformed,
                               size=summary.size, sha256=summary.sha256, archived_at=self.clock())  # fmt: skip
        run_view.run_state(self.store, run)  # the readers' view folds what is about to be trimmed first
        trimmed = commit_archive(redis, keys, run, record, lease=lease.owner)  # ArchiveConflict: nothing trimmed
        failpoint("archive-after-trim", redis, keys)
        held = hold if hold is not None and summary.last != stream_last else None
        return ArchiveResult(run=run, path=summary.path, count=summary.count, malformed=summary.malformed,
                             first=summary.first, last=summary.last, raw_bytes=summary.raw_bytes, size=summary.size,
                             trimmed=trimmed, remaining=self.store.length(run), held_by=held,
                             notes=tuple(notes))  # fmt: skip

    # -- steps ------------------------------------------------------------------------------------

    def _hold(self, run: str) -> Hold | None:
        holds = read_checkpoint_holds(self.store.redis, self.store.keys, run)
        feed = read_feed_holds(self.store.redis, self.store.keys)
        if run in feed:
            holds.append(feed[run])
        return tightest(holds)

    def _clean(self, run_dir: Path, recorded: set[str], run: str, *, dry_run: bool) -> list[str]:
        """Remove what a dead archive left: its partial file, and final files never recorded (so never trimmed)."""
        notes: list[str] = []
        if not run_dir.is_dir():
            return notes
        verb = "would remove" if dry_run else "removed"
        for partial in sorted(run_dir.glob(PARTIAL_GLOB)):
            pid = partial.name.removeprefix(".archive-").removesuffix(".partial")
            if pid.isdigit() and int(pid) != os.getpid() and process_alive(int(pid)):
                notes.append(f"left {partial.name}: process {pid} is alive (another archive of {run}?)")
                continue
            if not dry_run:
                partial.unlink(missing_ok=True)
            notes.append(f"{verb} {partial.name}, left by an archive that died while writing it")
        for path in sorted(run_dir.iterdir()):
            ids = parse_archive_name(path.name)
            if ids is None or path.name in recorded:
                continue
            still_there = bool(oldest_first(self.store.redis, self.store.keys, run, start=ids[0], end=ids[0],
                                            count=None, what="read a run's log"))  # fmt: skip
            if not still_there:
                notes.append(f"kept {path}: it is not recorded in Redis and its first entry is no longer in the log; "
                             f"check it with `trainwarden replay {run} --from {path}`")  # fmt: skip
                continue
            if not dry_run:
                path.unlink()
            notes.append(f"{verb} {path.name}, written by an archive that died before trimming (its entries are "
                         "still in the log)")  # fmt: skip
        return notes

    def _count(self, run: str, bound: str) -> tuple[int, str | None, str | None]:
        """How many entries an archive up to `bound` would take (ids only; nothing decoded)."""
        count, first, last, start = 0, None, None, "-"
        while True:
            entries = oldest_first(self.store.redis, self.store.keys, run, start=start, end=bound, count=10_000,
                                   what="read a run's log")  # fmt: skip
            if not entries:
                return count, first, last
            count += len(entries)
            first = first or entries[0][0].decode()
            last = entries[-1][0].decode()
            start = next_id(last)

    def _write(self, run: str, run_dir: Path, bound: str, lease: ArchiveLease) -> ArchiveSummary:
        """Steps 3-5: the file, durable, under its final name and checked."""
        redis, keys = self.store.redis, self.store.keys
        try:
            writer = ArchiveWriter(run_dir, run)
        except OSError as exc:
            raise ArchiveWriteFailed(f"cannot write an archive in {run_dir}: {exc}; nothing was trimmed") from exc
        try:
            for sid, item in self.store.iter_run(run, until=bound):
                writer.write(sid, item)
                if writer.count == 1:
                    writer.flush()
                    failpoint("archive-mid-write", redis, keys)
                elif writer.count % LEASE_EVERY == 0:
                    lease.refresh()
                    if writer.count % PROGRESS_EVERY == 0:
                        self.progress(f"{run}: {writer.count:,} entries written ...")
            if writer.count == 0:
                raise ArchiveWriteFailed(f"the log of {run!r} up to {bound} was empty when read; nothing was trimmed")
            written = writer.close()
            failpoint("archive-before-rename", redis, keys)
            assert written.first is not None and written.last is not None
            final = writer.publish(archive_name(written.first, written.last))
        except OSError as exc:
            writer.discard()
            raise ArchiveWriteFailed(f"writing the archive of {run!r} in {run_dir} failed: {exc}; nothing was "
                                     "trimmed") from exc  # fmt: skip
        except BaseException:
            writer.discard()
            raise
        failpoint("archive-before-trim", redis, keys)
        lease.refresh()
        try:
            check = scan_archive(final)
        except ArchiveFormatError as exc:
            lease.refresh()  # still ours: no other archive can have written this name meanwhile
            final.unlink(missing_ok=True)
            problem = f"the archive of {run!r} does not read back: {exc}; nothing was trimmed"
            raise ArchiveVerifyFailed(problem) from exc
        wanted = (run, written.count, written.first, written.last, written.size, written.sha256)
        got = (check.run, check.count, check.first, check.last, check.size, check.sha256)
        if got != wanted:
            lease.refresh()
            final.unlink(missing_ok=True)
            raise ArchiveVerifyFailed(f"the archive of {run!r} read back as {got}, written as {wanted}; nothing was "
                                      "trimmed")  # fmt: skip
        return check

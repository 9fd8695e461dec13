"""Where a run's archived head went: one hash per run (`tw:{run}:archive`), file name -> record.

The record is written by the same script that trims the stream (`commit_archive`), so "recorded"
and "trimmed" are one fact: an archive file without a record holds entries that are still in the
stream, and may be thrown away; one with a record may be the only copy of its entries.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from trainwarden.archive.errors import ArchiveConflict
from trainwarden.events.archive_state import commit_trim, record_values
from trainwarden.events.errors import DecodeError
from trainwarden.events.keys import Keys
from trainwarden.events.redis_types import Client
from trainwarden.events.sids import sid_key, sid_successor


@dataclass(frozen=True, slots=True)
class ArchiveRecord:
    """One archive file: which entries it holds, where it was written, and how to check it."""

    name: str  # the file name (trainwarden.archive.format.archive_name)
    path: str  # absolute path on the host that wrote it
    host: str
    first: str
    last: str
    count: int
    malformed: int
    size: int
    sha256: str
    archived_at: float

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: bytes | str) -> ArchiveRecord:
        try:
            obj: dict[str, Any] = json.loads(raw)
            return cls(**obj)
        except (ValueError, TypeError) as exc:
            raise DecodeError(f"unreadable archive record: {exc}") from None


def read_records(client: Client, keys: Keys, run: str) -> list[ArchiveRecord]:
    """The run's archive records, oldest entries first."""
    raw = record_values(client, keys, run)
    return sorted((ArchiveRecord.from_json(v) for v in raw), key=lambda r: sid_key(r.first))


def commit_archive(client: Client, keys: Keys, run: str, record: ArchiveRecord, *, lease: str) -> int:
    """Trim the stream up to `record.last` (exactly: XTRIM MINID, not `~`) and record the file, atomically.

    Returns how many entries were trimmed; raises ArchiveConflict when the stream no longer starts
    at `record.first` (another archive committed meanwhile) or `lease` no longer holds the run's archive
    lease (workers/archive_lease.py): nothing is trimmed then.
    """
    trimmed, head = commit_trim(client, keys, run, first=record.first, last=record.last,
                                minid=sid_successor(record.last), name=record.name, record=record.to_json(),
                                lease=lease)  # fmt: skip
    if trimmed == -1:
        raise ArchiveConflict(
            f"the log of {run!r} now starts at {head or 'nothing'}, not at {record.first}: another archive of it "
            "committed meanwhile; nothing was trimmed, run the archive again",
            run=run,
        )
    if trimmed == -3:
        raise ArchiveConflict(
            f"the archive lease of {run!r} is held by {head or 'nobody'} now, not by this archive (it stalled past "
            "its lease); nothing was trimmed, run the archive again",
            run=run,
        )
    if trimmed == -2:
        raise ArchiveConflict(f"entry {record.last} of {run!r} is no longer in its log; nothing was trimmed", run=run)
    return trimmed

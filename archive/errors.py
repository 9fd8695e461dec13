"""Errors of archiving a run's log and reading it back (the whole tree is drawn in core/errors.py).

TrainwardenError (trainwarden.core.errors)
└── ArchiveError                  archiving a run's log or reading it back
    ├── ArchiveFormatError        a file that is not what `trainwarden archive` writes (file:line)
    │   └── ArchiveLineError      what is wrong with one line (the reader adds file:line)
    ├── ArchiveNotFound           a run's history is in archive files that are not on this machine
    ├── HistoryIncomplete         archives kept trimming the log while it was read: a hole remains
    ├── ArchiveConflict           the stream's head moved while an archive of it was written (nothing trimmed)
    ├── ArchiveBusy               another archive of the run is in progress
    ├── ArchiveWriteFailed        the file could not be written (disk full, permissions; nothing trimmed)
    └── ArchiveVerifyFailed       the file read back does not hold what was read from the log (nothing trimmed)

An archive that did not complete never trims the log, so nothing is lost.
"""

from __future__ import annotations

from trainwarden.core.errors import TrainwardenError


class ArchiveError(TrainwardenError):
    """Base class of the archive's errors."""


class ArchiveFormatError(ArchiveError):
    """An archive file (archive/format.py) is damaged, cut short or not an archive; says file:line."""


class ArchiveLineError(ArchiveFormatError):
    """What is wrong with one line; the parser turns it into an ArchiveFormatError naming file and line."""


class ArchiveNotFound(ArchiveError):
    """The run's events were archived to files this machine does not have (the message names them)."""


class HistoryIncomplete(ArchiveError):
    """Archives trimmed the run's log while it was read, every try: the message names the entries missing."""


class ArchiveConflict(ArchiveError):
    """The run's stream no longer starts where the archive just written does (another archive trimmed it)."""


class ArchiveBusy(ArchiveError):
    """Another archive of the run holds its lease (or took it over from this one)."""


class ArchiveWriteFailed(ArchiveError):
    """The archive file could not be written."""


class ArchiveVerifyFailed(ArchiveError):
    """The archive file read back differs from what was read from the log."""

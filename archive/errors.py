"""Errors of archiving.

TrainwardenError (events.errors)
└── ArchiveError              an archive of a run's log could not be completed (nothing was trimmed)
    ├── ArchiveBusy           another archive of the run is in progress
    ├── ArchiveWriteFailed    the file could not be written (disk full, permissions)
    └── ArchiveVerifyFailed   the file read back does not hold what was read from the log
"""

from __future__ import annotations

from trainwarden.events.errors import TrainwardenError


class ArchiveError(TrainwardenError):
    """An archive did not complete; the log was not trimmed, so nothing is lost."""


class ArchiveBusy(ArchiveError):
    """Another archive of the run holds its lease (or took it over from this one)."""


class ArchiveWriteFailed(ArchiveError):
    """The archive file could not be written."""


class ArchiveVerifyFailed(ArchiveError):
    """The archive file read back differs from what was read from the log."""

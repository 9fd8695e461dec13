"""The root of trainwarden's exception tree and the errors of the event log.

    TrainwardenError                 every error trainwarden raises on purpose
    ├── EventError                   an event or envelope that breaks the schema
    │   ├── EnvelopeError            building an event with bad fields (caller bug)
    │   ├── DecodeError              a stored entry that cannot be read back
    │   └── ArchiveFormatError       an archive file that is not what `trainwarden archive` writes (file:line)
    ├── StoreError                   talking to the event log failed
    │   ├── StoreUnavailable         Redis unreachable or timed out (retryable)
    │   └── ArchiveConflict          the stream's head moved while an archive of it was written
    └── YamlFileError                a config, policy or plan file that does not match its schema

Other packages hang their own trees under `TrainwardenError` in their errors.py.
"""

from __future__ import annotations

from typing import Any


class TrainwardenError(Exception):
    """Base class; keyword-only context (`run=`, `host=`, `event_id=`) travels with the message."""

    retryable: bool = False

    def __init__(self, message: str, **context: Any) -> None:
        self.context = {k: v for k, v in context.items() if v is not None}
        super().__init__(message)

    def __str__(self) -> str:
        message = super().__str__()
        if not self.context:
            return message
        where = ", ".join(f"{k}={v}" for k, v in self.context.items())
        return f"{message} [{where}]"


class EventError(TrainwardenError):
    """An event that does not satisfy the envelope schema."""


class EnvelopeError(EventError):
    """Raised when code builds an event with invalid fields."""


class DecodeError(EventError):
    """Raised when a stored stream entry cannot be decoded; such entries are dead-lettered."""


class ArchiveFormatError(EventError):
    """An archive file (events/archive_format.py) is damaged, cut short or not an archive; says file:line."""


class StoreError(TrainwardenError):
    """Raised when the event log rejects or fails an operation."""


class StoreUnavailable(StoreError):
    """Redis cannot be reached or timed out; the operation may be retried safely (appends are idempotent)."""

    retryable = True


class ArchiveConflict(StoreError):
    """The run's stream no longer starts where the archive just written does (another archive trimmed it)."""


class YamlFileError(TrainwardenError):
    """A YAML file (settings, servers, experiments, plans) is invalid; the message starts with file:line:col."""

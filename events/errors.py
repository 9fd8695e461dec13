"""Errors of the event log (the whole tree is drawn in core/errors.py).

TrainwardenError (trainwarden.core.errors)
└── EventLogError                    the event log
    ├── EventError                   an event or envelope that breaks the schema
    │   ├── EnvelopeError            building an event with bad fields (caller bug)
    │   └── DecodeError              a stored entry that cannot be read back
    └── StoreError                   talking to the event log failed
        ├── StoreUnavailable         Redis unreachable or timed out (callers retry)
        │   └── StoreRefused         Redis up but refusing writes for now: OOM, MISCONF, READONLY, BUSY (retried alike)
        ├── StoreAuthFailed          Redis refused our credentials (never retried: the daemon exits)
        ├── AclUncheckable           Redis cannot check an ACL user's rights for us (before 7.0)
        └── LeaseLost                this process no longer holds its role's lease (events/lease.py): it stands by
"""

from __future__ import annotations

from trainwarden.core.errors import TrainwardenError


class EventLogError(TrainwardenError):
    """Base class of the event log's errors."""


class EventError(EventLogError):
    """An event that does not satisfy the envelope schema."""


class EnvelopeError(EventError):
    """Raised when code builds an event with invalid fields."""


class DecodeError(EventError):
    """Raised when a stored stream entry cannot be decoded; such entries are dead-lettered."""


class StoreError(EventLogError):
    """Raised when the event log rejects or fails an operation."""


class StoreUnavailable(StoreError):
    """Redis cannot be reached or timed out; the operation may be retried safely (appends are idempotent)."""


class StoreRefused(StoreUnavailable):
    """Redis answers but refuses writes until memory, disk or a failover is sorted out (OOM at maxmemory,
    MISCONF, READONLY, BUSY, NOREPLICAS): waited out like an outage, and said as such (`trainwarden health`)."""


class StoreAuthFailed(StoreError):
    """Redis refused the credentials (no password, wrong password, ACL user without rights): retrying
    cannot help, so daemons stop and say so in one line (the URL shown with its password masked)."""


class AclUncheckable(StoreError):
    """Redis cannot say whether a user may run a command (no `redis.acl_check_cmd` before Redis 7):
    `trainwarden health --here` says so instead of judging the ACL."""


class LeaseLost(StoreError):
    """Another process took over this one's lease (events/lease.py); its writes were refused, and it stands by."""

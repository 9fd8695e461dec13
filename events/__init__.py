"""The event log: envelope, codec, Redis Streams store, consumer groups, projections."""

from trainwarden.core.errors import TrainwardenError
from trainwarden.events.codec import decode, encode
from trainwarden.events.envelope import Event, make_event, time_seq
from trainwarden.events.errors import (
    DecodeError,
    EnvelopeError,
    EventError,
    StoreError,
    StoreUnavailable,
)
from trainwarden.events.keys import Keys
from trainwarden.events.projection import RunState, apply, fold
from trainwarden.events.store import EventStore, Malformed

__all__ = [
    "DecodeError",
    "EnvelopeError",
    "Event",
    "EventError",
    "EventStore",
    "Keys",
    "Malformed",
    "RunState",
    "StoreError",
    "StoreUnavailable",
    "TrainwardenError",
    "apply",
    "decode",
    "encode",
    "fold",
    "make_event",
    "time_seq",
]

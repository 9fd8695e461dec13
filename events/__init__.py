"""The event log: envelope, codec, Redis Streams store, consumer groups, projections."""

from events.codec import decode, encode
from events.envelope import Event, make_event, time_seq
from events.errors import DecodeError, EnvelopeError, EventError, StoreError, StoreUnavailable, TrainwardenError
from events.keys import Keys
from events.projection import RunState, apply, fold
from events.store import EventStore, Malformed

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

"""The types at the boundary with redis-py: which clients we use and what their replies hold.

redis-py types a reply as `bytes | str` (and a stream entry's id and fields as possibly None),
because one client class serves connections that decode responses and ones that do not. Ours never
decode (`decode_responses` is never set) and speak RESP2, so every reply is bytes. These functions
state that once, for the type checker, and cost nothing at run time: each returns its argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias, cast

import redis
from redis.client import Pipeline
from redis.cluster import RedisCluster
from redis.typing import EncodableT, FieldT

Client: TypeAlias = redis.Redis | RedisCluster  # the event log's: one server, or a Redis Cluster
Entry: TypeAlias = tuple[bytes, dict[bytes, bytes]]  # a stream entry: its id and its fields
__all__ = ["Client", "Entry", "Pipeline"]  # Pipeline: for callers that hand a repository their pipeline=


def stream_entries(reply: object) -> list[Entry]:
    """XRANGE, XREVRANGE: the entries, in the reply's order."""
    return cast(list[Entry], reply)


def stream_reads(reply: object) -> list[tuple[bytes, list[Entry]]]:
    """XREAD, XREADGROUP of new entries ('>'): per stream read, its key and entries ([] when none)."""
    return cast(list[tuple[bytes, list[Entry]]], reply or [])


def pending_reads(reply: object) -> list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes] | None]]]]:
    """XREADGROUP of a consumer's pending entries (an id, not '>'): like `stream_reads`, but an entry
    trimmed from the stream since it was delivered comes back with None for its fields."""
    return cast(list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes] | None]]]], reply or [])


def hash_fields(reply: object) -> dict[bytes, bytes]:
    """HGETALL: the hash's fields and values ({} when the key does not exist)."""
    return cast(dict[bytes, bytes], reply)


def bytes_value(reply: object) -> bytes | None:
    """GET, HGET: the value, or None when there is none."""
    return cast(bytes | None, reply)


def scored_members(reply: object) -> list[tuple[bytes, float]]:
    """ZRANGE and friends `withscores=True`: (member, score) pairs."""
    return cast(list[tuple[bytes, float]], reply)


def field_map(mapping: Mapping[str, str | bytes]) -> dict[FieldT, EncodableT]:
    """A field map for XADD or HSET: redis-py's parameter type is invariant in the key, so a
    `dict[str, str]` does not match it though redis-py takes it as is."""
    return cast(dict[FieldT, EncodableT], mapping)

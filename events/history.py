"""A run's log read newest first, a page at a time: /status, the guard, the dead-man check, the policy reload.

The oldest-first reads are the store's (`EventStore.read`, `iter_run`); these go the other way, to find the
latest of something without reading the whole log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client, Entry, stream_entries


def newest_first(client: Client, keys: Keys, run: str, *, end: str = "+", count: int, what: str) -> list[Entry]:
    """Up to `count` entries of `run`'s log, newest first, from stream id `end` down (`(id` excludes it)."""
    with redis_errors(what, run=run):
        return stream_entries(client.xrevrange(keys.log(run), max=end, count=count))


def newest_pages(
    client: Client, keys: Keys, ends: Iterable[tuple[str, str]], *, count: int, what: str
) -> list[list[Entry]]:
    """`newest_first` for several (run, end) pairs in one pipelined round trip, in their order."""
    with redis_errors(what):
        pipe = client.pipeline(transaction=False)
        for run, end in ends:
            pipe.xrevrange(keys.log(run), max=end, count=count)
        replies: Sequence[object] = pipe.execute()
    return [stream_entries(reply) for reply in replies]


def has_written(client: Client, keys: Keys, run: str, producer: str) -> bool:
    """Whether `producer` has appended anything to `run`'s log (it has a high-water mark): a cheap
    check before scanning the log for its answer."""
    with redis_errors("read a run's high-water marks", run=run):
        return client.hget(keys.hwm(run), producer) is not None


def known_run(client: Client, keys: Keys, run: str) -> bool:
    """Whether `run` has appended anything (it is in the runs index)."""
    with redis_errors("look up a run", run=run):
        return client.zscore(keys.runs(), run) is not None


def oldest_first(
    client: Client, keys: Keys, run: str, *, start: str = "-", end: str = "+", count: int | None, what: str
) -> list[Entry]:
    """Up to `count` raw entries of `run`'s log from `start` to `end`, oldest first (`(id` excludes it):
    for readers that need the entries as stored (the archive), not decoded (`EventStore.read`)."""
    with redis_errors(what, run=run):
        return stream_entries(client.xrange(keys.log(run), min=start, max=end, count=count))

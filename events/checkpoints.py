"""A run's worker checkpoint (`Keys.cursor`: a hash of the evaluation's progress and pending actions), and
the optimistic update that guards it.

The fields' meaning is the workers' (workers/checkpoint.py encodes and decodes them); this module owns how
they are stored. Every commit is WATCHed: read the checkpoints under WATCH, compute, queue the new
checkpoint with the outputs (`tx.pipeline` goes to `EventStore.append(pipeline=)` and friends) after
`begin`, and `commit`: False when a checkpoint moved meanwhile, and nothing was written. That is how two
jobs can never both commit the same progress, whatever their locks did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

import redis
from redis.client import Pipeline
from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client, field_map, hash_fields


class CheckpointTx:
    """One optimistic update of some runs' checkpoints (made by `watch_checkpoints`)."""

    def __init__(self, pipe: Pipeline, keys: Keys) -> None:
        self.pipeline = pipe
        self.keys = keys

    def read(self, run: str) -> dict[bytes, bytes]:
        """A watched checkpoint's fields as stored now ({} for none); before `begin`."""
        with redis_errors("read a run's checkpoint", run=run):
            return hash_fields(self.pipeline.hgetall(self.keys.cursor(run)))

    def begin(self) -> None:
        """From here on, writes are queued (MULTI) until `commit`."""
        self.pipeline.multi()

    def write(self, run: str, fields: Mapping[str, str | bytes], drop: Sequence[str] = ()) -> None:
        """Queue the run's new checkpoint: the fields given set, those in `drop` deleted, others as they are."""
        key = self.keys.cursor(run)
        if drop:
            self.pipeline.hdel(key, *drop)
        self.pipeline.hset(key, mapping=field_map(fields))

    def write_pending(self, run: str, pending: str) -> None:
        """Queue the run's pending actions alone (their JSON list)."""
        self.pipeline.hset(self.keys.cursor(run), "pending", pending)

    def commit(self, *, what: str = "commit a run's checkpoint") -> bool:
        """EXEC what was queued: False when a watched checkpoint moved (nothing written), else True."""
        with redis_errors(what):
            try:
                self.pipeline.execute()
            except redis.WatchError:
                return False
        return True


@contextlib.contextmanager
def watch_checkpoints(client: Client, keys: Keys, runs: Sequence[str]) -> Iterator[CheckpointTx]:
    """WATCH the runs' checkpoints for one `CheckpointTx` (none: a transaction that guards nothing)."""
    with client.pipeline(transaction=True) as pipe:
        if runs:
            with redis_errors("watch the runs' checkpoints"):
                pipe.watch(*[keys.cursor(run) for run in runs])
        yield CheckpointTx(pipe, keys)


def read_checkpoint(client: Client, keys: Keys, run: str) -> dict[bytes, bytes]:
    """The run's checkpoint fields, unwatched ({} for none): to look, not to update."""
    with redis_errors("read a run's checkpoint", run=run):
        return hash_fields(client.hgetall(keys.cursor(run)))

"""Short-lived marks with a TTL: a run's "a job waits for it" flags (one per lane) and the Slack requests
already seen. Each is one key written with SET NX or EX: whoever sets it first wins, and it goes away by
itself when its holder dies.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client


def flag_queued(
    client: Client, keys: Keys, runs: Sequence[str], *, fast: bool, ttl_s: int, reclaimed: bool
) -> set[str]:
    """Flag `runs` as having a job waiting in the lane (`fast` or the normal one); the runs this call flagged.

    A new entry's run is flagged only where no job waits for it (SET NX); a reclaimed entry's run where the
    flag is gone (the job that had it is dead or finished without it). Two pipelined round trips at most.
    """
    flag = keys.fast if fast else keys.queued
    with redis_errors("flag runs as queued"):
        if reclaimed:
            pipe = client.pipeline(transaction=False)
            for run in runs:
                pipe.exists(flag(run))
            free = [run for run, waiting in zip(runs, pipe.execute(), strict=True) if not waiting]
            pipe = client.pipeline(transaction=False)
            for run in free:
                pipe.set(flag(run), "1", ex=ttl_s)
            pipe.execute()
            return set(free)
        pipe = client.pipeline(transaction=False)
        for run in runs:
            pipe.set(flag(run), "1", nx=True, ex=ttl_s)
        return {run for run, was_set in zip(runs, pipe.execute(), strict=True) if was_set}


def clear_queued(client: Client, keys: Keys, run: str) -> None:
    """A job for `run` started: drop both lanes' flags, so new events flag the run again."""
    with redis_errors("clear a run's queued flags", run=run):
        client.delete(keys.queued(run), keys.fast(run))


def first_request(client: Client, keys: Keys, signature: str, *, ttl_s: int) -> bool:
    """Whether this Slack request signature is new (recorded now for `ttl_s`); False for a replay."""
    with redis_errors("check a Slack request for replay"):
        return bool(client.set(keys.slack_request(signature), "1", nx=True, ex=ttl_s))

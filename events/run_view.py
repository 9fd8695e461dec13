"""The run's state for readers (the bot's /status and its trend lines): the projection of
events/projection.py folded over the run's log, with a snapshot of its own in Redis so that a read
folds only the events since the last one.

The workers keep a copy of the run state inside their checkpoint, beside their rule state; that hash
is theirs and its format may change with them. Readers use this view, which depends only on the log.
A snapshot is a cache: any snapshot is the exact fold of the log up to its `after`, so readers may
race (each writes only over the snapshot it started from). The archiver refreshes the view before it
trims the log's head, so the trimmed events are always folded into the snapshot first.

The snapshot is Redis's; on any other backend (events/backend.py `EventLog`, e.g. the in-memory store)
the same functions fold the run's whole log, so the bot's logic runs there unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainwarden.events.backend import EventLog
from trainwarden.events.projection import RunState, apply, decode_state, encode_state
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import hash_fields, stream_entries
from trainwarden.events.store import EventStore, Malformed, decode_entries, next_id

PAGE = 1_000  # entries after a snapshot read in the batched round trip; a run with more reads the rest alone

# KEYS: the view's hash. ARGV: the `after` the fold started from ('' for none), the new after, the state and its
# recent metrics (events/projection.py `encode_state`). Written only if no other reader (or the archiver) moved the
# snapshot meanwhile.
_SAVE = """
if (redis.call('HGET', KEYS[1], 'after') or '') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'after', ARGV[2], 'state', ARGV[3], 'recent', ARGV[4])
return 1
"""


def load(store: EventStore, run: str) -> tuple[RunState, str | None]:
    """The snapshot and the stream id it covers (an empty state and None when there is none)."""
    with redis_errors("read a run's view", run=run):
        raw = hash_fields(store.redis.hgetall(store.keys.view(run)))
    return _snapshot(raw)


def _snapshot(raw: dict[bytes, bytes]) -> tuple[RunState, str | None]:
    if not raw:
        return RunState(), None
    return decode_state(raw[b"state"], raw.get(b"recent")), raw[b"after"].decode() or None


def _folded(log: EventLog, run: str) -> RunState:
    """The run's state folded from its log's start: a backend without the snapshot."""
    state = RunState()
    for _sid, item in log.iter_run(run):
        if not isinstance(item, Malformed):
            apply(state, item)
    return state


def run_state(store: EventLog, run: str) -> RunState:
    """The run's state now: the snapshot moved over the events after it, and saved when it moved."""
    if not isinstance(store, EventStore):
        return _folded(store, run)
    state, after = load(store, run)
    last = after
    for sid, item in store.iter_run(run, after=after):
        last = sid
        if not isinstance(item, Malformed):
            apply(state, item)
    if last != after and last is not None:
        with redis_errors("save a run's view", run=run):
            store.redis.eval(_SAVE, 1, store.keys.view(run), after or "", last, *encode_state(state))
    return state


Moved = tuple[str, str | None, str, RunState]  # run, the snapshot's `after` read, the last id folded, the state


def run_states(store: EventLog, runs: Sequence[str]) -> dict[str, RunState]:
    """Many runs' states at once (`trainwarden runs`): `read_states`, then the moved snapshots written back."""
    states, moved = read_states(store, runs)
    save_views(store, moved)
    return states


def read_states(store: EventLog, runs: Sequence[str]) -> tuple[dict[str, RunState], list[Moved]]:
    """The same fold as `run_state` for many runs, read in two pipelined round trips whatever their number (the
    snapshots, then the events after them) rather than two per run; and the snapshots that moved, for `save_views`
    (now, or once a reply is out: /status). Once saved, a later read moves none."""
    if not runs:
        return {}, []
    if not isinstance(store, EventStore):
        return {run: _folded(store, run) for run in runs}, []
    with redis_errors("read the runs' views"):
        pipe = store.redis.pipeline(transaction=False)
        for run in runs:
            pipe.hgetall(store.keys.view(run))
        snapshots = [_snapshot(hash_fields(raw)) for raw in pipe.execute()]
        pipe = store.redis.pipeline(transaction=False)
        for run, (_, after) in zip(runs, snapshots, strict=True):
            pipe.xrange(store.keys.log(run), min="-" if after is None else next_id(after), count=PAGE)
        pages = [stream_entries(reply) for reply in pipe.execute()]
    states: dict[str, RunState] = {}
    moved: list[Moved] = []
    for run, (state, after), page in zip(runs, snapshots, pages, strict=True):
        items = decode_entries(page, run)
        if len(page) == PAGE:  # more than one page since the snapshot: the rest run by run
            items = [*items, *store.iter_run(run, after=items[-1][0])]
        for _sid, item in items:
            if not isinstance(item, Malformed):
                apply(state, item)
        states[run] = state
        if items:
            moved.append((run, after, items[-1][0], state))
    return states, moved


def save_views(store: EventLog, moved: Sequence[Moved]) -> None:
    """Write back the snapshots that moved: in one pipelined round trip on one Redis (with live runs every view
    moves between two reads), one call each on a cluster, whose pipeline takes no EVAL."""
    if not isinstance(store, EventStore):  # elsewhere nothing moves: there is no snapshot
        return
    args = [(run, store.keys.view(run), after or "", last, *encode_state(state)) for run, after, last, state in moved]
    if not args:
        return
    if not store.cluster:
        with redis_errors("save the runs' views"):
            pipe = store.redis.pipeline(transaction=False)
            for _run, *call in args:
                pipe.eval(_SAVE, 1, *call)
            pipe.execute()
        return
    for run, *call in args:
        with redis_errors("save a run's view", run=run):
            store.redis.eval(_SAVE, 1, *call)

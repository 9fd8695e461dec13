"""The batched turn: every run of a job brought up to date together, in a handful of round trips.

At 1,000 runs x 1 Hz a job sees about one event per run, and a run's own turn (workers/process.py)
paid ~8 Redis round trips for it: that, not the policy, was most of a worker's CPU per event
(docs/benchmarks.md, "Worker cost per event"). Here the runs of a job share each step:

1. one script clears their `queued` and `fast` flags and takes their locks (events/turns.py);
2. one WATCH of all their checkpoints (cursors);
3. one script reads every checkpoint and the log entries after it;
4. each run is evaluated in memory; one MULTI/EXEC commits every run's outputs, checkpoint (the rules that
   changed: workers/state_parts.py) and schedule (the WATCH guards all of them: a lock that expired under a
   stall cannot let two jobs commit the same progress), releases the locks and acknowledges the feed entries
   of the runs done here: four round trips a job. Without a commit (nothing read, or a WatchError), one
   script releases the locks and the caller acknowledges.

What this path does not do is left to the per-run turn (`RunProcessor`), for just those runs: a run
whose lock another job holds, whose checkpoint has pending actions, whose read filled a page, whose
evaluation produced outputs (they must be read back: that is how a STOP becomes pending actions, and
the STOP's actions are carried out there), and every run of the batch when the commit met a
WatchError (nothing of it was written). Those runs' work committed here stands: the per-run turn
goes on from it. Not on a Redis Cluster (one WATCH and one script over several runs' slots).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from trainwarden.events.checkpoints import CheckpointTx, watch_checkpoints
from trainwarden.events.envelope import Event
from trainwarden.events.faults import failpoint
from trainwarden.events.feed import ack_feed
from trainwarden.events.store import Malformed
from trainwarden.events.turns import lock_runs, queue_release, read_runs, release_runs
from trainwarden.workers.checkpoint import Checkpoint, CheckpointCache, decode_checkpoint, encode_checkpoint
from trainwarden.workers.config import CHECKPOINT_CACHE_RUNS
from trainwarden.workers.context import WorkerContext
from trainwarden.workers.evaluate import Step, evaluate_entries
from trainwarden.workers.schedule import next_tick

log = logging.getLogger(__name__)

PAGE = 2000  # entries read per run; a run with a full page goes on in its own turn (workers/process.py)
CACHE = CheckpointCache(max_runs=CHECKPOINT_CACHE_RUNS)  # this process's: jobs run one at a time in it


@dataclass(slots=True)
class BatchResult:
    done: list[str] = field(default_factory=list)  # runs brought up to date here: their feed entries may be acked
    rest: list[str] = field(default_factory=list)  # runs the per-run turn must take on (their work so far committed)
    summary: Counter[str] = field(default_factory=Counter)
    outputs: list[Event] = field(default_factory=list)  # committed here, for the Prometheus counts
    inputs: list[tuple[str, Event | Malformed]] = field(default_factory=list)  # what they were decided on (latency)
    acked: list[str] = field(default_factory=list)  # runs of `done` whose feed entries the commit acknowledged


@dataclass(slots=True)
class _Turn:
    run: str
    cp: Checkpoint
    step: Step
    inputs: list[tuple[str, Event | Malformed]]
    now: float
    version: str  # written with the checkpoint by the commit
    hand_on: bool  # outputs to read back or actions pending: the per-run turn goes on after the commit


def batched(ctx: WorkerContext) -> bool:
    """Whether jobs take the batched path: one Redis (not a cluster)."""
    return not ctx.store.cluster


def process_batch(ctx: WorkerContext, runs: Sequence[str], feed_ids: Mapping[str, Sequence[str]] | None = None,
                  group: str = "") -> BatchResult:  # fmt: skip
    """Bring `runs` up to date together as far as the batched path goes (see the module's docstring); the feed
    entries (`feed_ids` by run, of consumer group `group`) of the runs done are acknowledged with the commit."""
    result = BatchResult()
    client = ctx.redis  # batched(ctx): not a cluster
    keys = ctx.store.keys
    tokens = lock_runs(client, keys, runs, lock_ms=int(ctx.lock_timeout_s * 1000))
    result.rest.extend(run for run in runs if run not in tokens)  # another job holds it: wait for it there
    released = False
    try:
        locked = [run for run in runs if run in tokens]
        with watch_checkpoints(client, keys, locked) as tx:
            held = [CACHE.version(run) for run in locked]
            # after the WATCH: a change since fails the EXEC
            reads = read_runs(client, keys, locked, page=PAGE, held=held)
            turns: list[_Turn] = []
            for run, version in zip(locked, held, strict=True):
                read = reads[run]
                pending = read.fields is not None and read.fields.get(b"pending", b"[]") != b"[]"
                if pending or len(read.entries) >= PAGE:
                    result.rest.append(run)
                    continue
                if not read.entries:
                    result.done.append(run)
                    continue
                cp = _checkpoint(run, version, read.fields)
                if cp is None:  # not expected: Redis said the stored version is the one held
                    result.rest.append(run)
                    continue
                now = ctx.clock()
                step = evaluate_entries(ctx.policies.policy, cp, read.entries, run=run, host=ctx.host, now=now)
                hand_on = bool(step.outputs or cp.pending)
                turns.append(_Turn(run, cp, step, list(read.entries), now, version="", hand_on=hand_on))
            if turns:
                acks = [*result.done, *(turn.run for turn in turns if not turn.hand_on)] if feed_ids else []
                ids = [fid for run in acks for fid in feed_ids.get(run, ())] if feed_ids else []
                if _commit(ctx, tx, turns, tokens=tokens, ack=(group, ids)):
                    released = True
                    result.acked.extend(acks)
                else:
                    result.rest.extend(turn.run for turn in turns)
                    turns = []
    finally:
        if not released:
            release_runs(client, keys, tokens)
    for turn in turns:
        (result.rest if turn.hand_on else result.done).append(turn.run)
        if not turn.hand_on:  # the per-run turn writes it again: a version this process will not hold
            CACHE.put(turn.run, turn.version, turn.cp)
        for bad in turn.step.dead:
            log.warning("dead-lettered entry %s of run %s: %s", bad.sid, turn.run, bad.reason,
                        extra={"event_id": bad.sid, "run": turn.run})  # fmt: skip
        result.outputs.extend(turn.step.outputs)
        result.inputs.extend(turn.inputs)
        result.summary.update(events=len(turn.inputs), outputs=len(turn.step.outputs), dead_letters=len(turn.step.dead))
    return result


def _checkpoint(run: str, version: str, fields: dict[bytes, bytes] | None) -> Checkpoint | None:
    """The run's checkpoint: the one this process holds when Redis said it is still `version` (`fields` None),
    else the fields read decoded, with the rules that did not change since this process's own commit taken
    from what it held (another worker had the run's last job: with W workers, most turns)."""
    if fields is None:
        return CACHE.take(run, version)
    return decode_checkpoint(fields, salvage=CACHE.drop(run))


def _commit(ctx: WorkerContext, tx: CheckpointTx, turns: list[_Turn], *, tokens: dict[str, str],
            ack: tuple[str, list[str]]) -> bool:  # fmt: skip
    """Every turn's outputs, dead letters, checkpoint and schedule, the locks' release and the acknowledgement
    of the feed entries `ack` (group, ids) in one MULTI/EXEC; False on a WatchError (nothing of it done)."""
    store, keys = ctx.store, ctx.store.keys
    policy = ctx.policies.policy
    tx.begin()
    pipe = tx.pipeline
    for turn in turns:
        run, cp, step = turn.run, turn.cp, turn.step
        store.append(step.outputs, pipeline=pipe)
        for bad in step.dead:
            store.dead_letter(source=keys.log(run), sid=bad.sid, reason=bad.reason, fields=bad.fields,
                              pipeline=pipe, run=run)  # fmt: skip
        written = encode_checkpoint(cp)
        turn.version = written.version
        tx.write(run, written.fields, written.drop)
        due = next_tick(cp, policy, ctx.ticks, wall_now=turn.now)
        if due is None:
            store.shared(pipe, run, "ZREM", keys.schedule(), run)
        else:
            store.shared(pipe, run, "ZADD", keys.schedule(), repr(due), run)
    queue_release(pipe, keys, tokens)
    group, ids = ack
    ack_feed(pipe, stream=keys.feed(), group=group, ids=ids)
    failpoint("before-batch-commit", ctx.redis, keys)  # all of it queued, nothing sent: killed here, nothing lands
    if not tx.commit(what="commit the batched runs' checkpoints"):
        log.info("a checkpoint of the %d runs batched moved under us; each goes on in its own turn", len(turns))
        return False
    failpoint("after-batch-commit", ctx.redis, keys)  # committed, locks released, entries acknowledged; not cached
    return True

"""The RQ job: bring one run up to date (evaluate new events, then carry out pending actions).

Effectively-once, in the order the style guide asks for: read from the checkpoint, compute, then
write the new events and the new checkpoint in one MULTI/EXEC (WATCHed, so two jobs can never
both commit the same progress), and only then acknowledge the feed entries. A job killed at any
point is redone from the last commit by whichever job the dispatcher enqueues next.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import redis
from redis.lock import Lock

from events.feed import ack_feed
from workers.actions import perform
from workers.checkpoint import decode_checkpoint, encode_checkpoint
from workers.context import WorkerContext, current
from workers.errors import RunBusy
from workers.evaluate import evaluate_entries
from workers.faults import failpoint
from workers.schedule import next_tick

log = logging.getLogger(__name__)

PAGE = 2000


def process_run(run: str, feed_ids: list[str]) -> dict[str, int]:
    """RQ entry point (referenced as workers.process.process_run)."""
    ctx = current()
    ctx.redis.delete(ctx.store.keys.queued(run))
    record_policy_events(ctx)
    summary = RunProcessor(ctx, run).process()
    ack_feed(ctx.redis, stream=ctx.store.keys.feed(), group=ctx.feed_group, ids=feed_ids)
    return summary


def record_policy_events(ctx: WorkerContext) -> None:
    """Pick up a changed policy file and record `policy.loaded` / `policy.rejected` (in `trainwarden.system`)."""
    events = ctx.policies.refresh()
    if events:
        ctx.store.append(events)
        ctx.policies.recorded()


class RunProcessor:
    def __init__(self, ctx: WorkerContext, run: str) -> None:
        self.ctx = ctx
        self.run = run
        self.policy = ctx.policies.policy  # one policy for the whole job
        self.keys = ctx.store.keys
        self.summary = {"events": 0, "outputs": 0, "dead_letters": 0, "actions": 0}

    def process(self) -> dict[str, int]:
        lock = Lock(
            self.ctx.redis,
            self.keys.lock(self.run),
            timeout=self.ctx.lock_timeout_s,
            blocking_timeout=self.ctx.lock_timeout_s,
        )
        if not lock.acquire():
            raise RunBusy(f"another worker held the lock for over {self.ctx.lock_timeout_s:.0f}s", run=self.run)
        try:
            self._evaluate(lock)
            self._perform_pending(lock)
        finally:
            try:
                lock.release()
            except redis.exceptions.LockError:
                log.warning("lock for %s expired while processing; commits were still guarded by WATCH", self.run)
        return self.summary

    def _evaluate(self, lock: Lock) -> None:
        cursor = self.keys.cursor(self.run)
        while True:
            with self.ctx.redis.pipeline(transaction=True) as pipe:
                pipe.watch(cursor)
                cp = decode_checkpoint(pipe.hgetall(cursor))
                entries = self.ctx.store.read(self.run, after=cp.after, count=PAGE)
                if not entries:
                    return
                now = self.ctx.clock()
                step = evaluate_entries(self.policy, cp, entries, run=self.run, host=self.ctx.host, now=now)
                failpoint("before-commit", self.ctx.redis, self.keys)
                pipe.multi()
                self.ctx.store.append(step.outputs, pipeline=pipe)
                for bad in step.dead:
                    self.ctx.store.dead_letter(source=self.keys.log(self.run), sid=bad.sid, reason=bad.reason,
                                               fields=bad.fields, pipeline=pipe, run=self.run)  # fmt: skip
                pipe.hset(cursor, mapping=encode_checkpoint(cp))
                due = next_tick(cp, self.policy, self.ctx.ticks, wall_now=now)
                if due is None:
                    self.ctx.store.shared(pipe, self.run, "ZREM", self.keys.schedule(), self.run)
                else:
                    self.ctx.store.shared(pipe, self.run, "ZADD", self.keys.schedule(), repr(due), self.run)
                try:
                    pipe.execute()
                except redis.WatchError:
                    log.info("checkpoint of %s moved under us; re-reading", self.run)
                    continue
            self.ctx.store.flush([self.run])
            failpoint("after-commit", self.ctx.redis, self.keys)
            for bad in step.dead:
                log.warning("dead-lettered entry %s of run %s: %s", bad.sid, self.run, bad.reason)
            self.summary["events"] += len(entries)
            self.summary["outputs"] += len(step.outputs)
            self.summary["dead_letters"] += len(step.dead)
            lock.reacquire()

    def _perform_pending(self, lock: Lock) -> None:
        cursor = self.keys.cursor(self.run)
        while True:
            with self.ctx.redis.pipeline(transaction=True) as pipe:
                pipe.watch(cursor)
                cp = decode_checkpoint(pipe.hgetall(cursor))
                if not cp.pending:
                    return
                action: dict[str, Any] = cp.pending.pop(0)
                event = perform(self.ctx, self.run, cp, action, now=self.ctx.clock())
                failpoint("after-action", self.ctx.redis, self.keys)
                pipe.multi()
                if event is not None:
                    self.ctx.store.append([event], pipeline=pipe)
                pipe.hset(cursor, "pending", json.dumps(cp.pending))
                try:
                    pipe.execute()
                except redis.WatchError:
                    continue
            self.ctx.store.flush([self.run])
            self.summary["actions"] += 1
            lock.reacquire()

"""The RQ job: bring one run up to date (evaluate new events, then carry out pending actions).

A critical anomaly's chart is an action too, but it is drawn after every other one (the evidence, the
stop), once the run's lock is released, and not while input not yet evaluated is in the log: drawing it
never delays a STOP, of the same job or of the next (`RunProcessor._draw_charts`).

Effectively-once, in the order the style guide asks for: read from the checkpoint, compute, then
write the new events and the new checkpoint in one MULTI/EXEC (WATCHed, so two jobs can never
both commit the same progress), and only then acknowledge the feed entries. A job killed at any
point is redone from the last commit by whichever job the dispatcher enqueues next.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, cast

from rq.timeouts import JobTimeoutException
from trainwarden.core.counters import count
from trainwarden.core.logcontext import log_context
from trainwarden.events import breaker as events_breaker
from trainwarden.events import types as t
from trainwarden.events.checkpoints import CheckpointTx, read_checkpoint, watch_checkpoints
from trainwarden.events.envelope import Event
from trainwarden.events.faults import failpoint
from trainwarden.events.feed import ack_feed
from trainwarden.events.flags import clear_queued
from trainwarden.events.latency import observe_decisions
from trainwarden.events.payloads import DecisionData, StopRequestedData
from trainwarden.events.redis_errors import describe, transient
from trainwarden.events.run_lock import RunLock
from trainwarden.events.store import Malformed
from trainwarden.policies.durations import fmt_duration
from trainwarden.workers import breaker as stop_breaker
from trainwarden.workers.batch import batched, process_batch
from trainwarden.workers.checkpoint import ACTION_CHART, awaiting_due, decode_checkpoint, encode_checkpoint
from trainwarden.workers.context import WorkerContext, current
from trainwarden.workers.errors import RunBusy, RunsFailed
from trainwarden.workers.evaluate import evaluate_next
from trainwarden.workers.lanes import yield_to_fast_lane
from trainwarden.workers.performers import Awaiting, perform
from trainwarden.workers.schedule import next_tick

log = logging.getLogger(__name__)

PAGE = 2000
PEEK = 100  # entries looked at for unread input before drawing an anomaly's chart


def process_run(run: str, feed_ids: list[str]) -> dict[str, int]:
    """RQ entry point for one run (referenced as trainwarden.workers.process.process_run)."""
    ctx = current()
    record_policy_events(ctx)
    with log_context(run=run):
        summary = _bring_up_to_date(ctx, run)
    ack_feed(ctx.redis, stream=ctx.store.keys.feed(), group=ctx.feed_group, ids=feed_ids)
    return summary


def process_runs(work: Sequence[Sequence[Any]]) -> dict[str, int]:
    """RQ entry point for a job covering several runs: [(run, feed ids), ...], each as `process_run`.

    Runs are processed one after another, each under its own lock with its own commits. The feed
    entries of the runs whose work is committed are acknowledged together at the end, also when
    the job times out (a job killed outright leaves them pending: they are dispatched again and
    found done). A run that fails does not cost the others their turn: its entries stay pending
    (claimed again after `reclaim_idle_s`) and the job ends with RunsFailed naming it. A job
    timeout is not caught: RQ ends the job.
    """
    ctx = current()
    record_policy_events(ctx)
    total: Counter[str] = Counter()
    failed: dict[str, str] = {}
    done: list[str] = []  # feed entries of runs whose work is committed, acknowledged together (one round trip)
    started = time.monotonic()
    try:
        if batched(ctx) and len(work) > 1:  # one run gains little (5 round trips, not 7): its own turn serves it
            work = _batch_first(ctx, work, total, done)
        for index, (run, feed_ids) in enumerate(work):
            if index and yield_to_fast_lane(work[index:], started=started):  # a NaN run waits: the rest, to a new job
                break
            try:
                with log_context(run=run):  # the lines of its turn carry the run, the failure's below too
                    total.update(_bring_up_to_date(ctx, run))
            except JobTimeoutException:
                raise
            except Exception as exc:  # one run's failure (a bug, a busy lock, Redis) must not hold up the others
                if transient(
                    exc
                ):  # Redis is away: the runs after it would fail alike, so one line, not a traceback each
                    log.warning("Redis failed the processing of run %s (%s); the job's %d remaining runs stay "
                                "pending and are retried", run, describe(exc), len(work) - index,
                                extra={"run": run})  # fmt: skip
                    failed.update({later: f"{type(exc).__name__}: {exc}" for later, _ in work[index:]})
                    break
                log.exception("processing run %s failed; its feed entries stay pending and are retried", run,
                              extra={"run": run})  # fmt: skip
                failed[run] = f"{type(exc).__name__}: {exc}"
                continue
            done.extend(feed_ids)
    finally:
        ack_feed(ctx.redis, stream=ctx.store.keys.feed(), group=ctx.feed_group, ids=done)
    if failed:
        raise RunsFailed(failed)
    return dict(total)


def _batch_first(ctx: WorkerContext, work: Sequence[Sequence[Any]], total: Counter[str],
                 done: list[str]) -> Sequence[Sequence[Any]]:  # fmt: skip
    """The batched turn (workers/batch.py) for all runs of the job; returns the work left to per-run turns.

    A failure of the batched turn leaves every run to its own turn (a Redis outage fails those too)."""
    try:
        result = process_batch(ctx, [run for run, _ in work], {run: ids for run, ids in work}, ctx.feed_group)
    except JobTimeoutException:
        raise
    except Exception as exc:
        away = transient(exc)
        log.warning("the batched turn of %d runs failed (%s); each goes on in its own turn", len(work),
                    describe(exc) if away else f"{type(exc).__name__}: {exc}", exc_info=not away)  # fmt: skip
        return work
    total.update(result.summary)
    count_outputs(result.outputs, result.inputs, now=ctx.clock())
    stop_breaker.settle_ended(ctx, result.inputs)
    finished, acked = set(result.done), set(result.acked)  # those acknowledged with the batch's commit
    done.extend(fid for run, feed_ids in work if run in finished and run not in acked for fid in feed_ids)
    return [item for item in work if item[0] not in finished]


def _bring_up_to_date(ctx: WorkerContext, run: str) -> dict[str, int]:
    # The flags go before the read: events whose feed entries the dispatcher acknowledged as covered
    # by a waiting job (of either lane) were appended before the dispatcher saw its flag, so the read
    # below includes them; a job of the other lane still waiting reads again (finding little or nothing).
    clear_queued(ctx.redis, ctx.store.keys, run)
    return RunProcessor(ctx, run).process()


def record_policy_events(ctx: WorkerContext) -> None:
    """Pick up a changed policy file and record `policy.loaded` / `policy.rejected` (in `trainwarden.system`)."""
    events = ctx.policies.refresh()
    if events:
        ctx.store.append(events)
        ctx.policies.recorded(events)
        if any(e.type == t.POLICY_LOADED for e in events):  # its rules' first loads: the breaker's new-rule grace
            events_breaker.note_rules(ctx.redis, ctx.store.keys, [r.definition for r in ctx.policies.policy.rules],
                                    now=ctx.clock())  # fmt: skip


class RunProcessor:
    def __init__(self, ctx: WorkerContext, run: str) -> None:
        self.ctx = ctx
        self.run = run
        self.policy = ctx.policies.policy  # one policy for the whole job
        self.keys = ctx.store.keys
        self.summary = {"events": 0, "outputs": 0, "dead_letters": 0, "actions": 0}

    def process(self) -> dict[str, int]:
        lock = RunLock(self.ctx.redis, self.keys, self.run, timeout_s=self.ctx.lock_timeout_s)
        if not lock.acquire():
            raise RunBusy(
                f"another worker held the lock for over {fmt_duration(self.ctx.lock_timeout_s)}", run=self.run
            )
        pending = False
        try:
            pending = self._evaluate(lock)
            if pending:
                self._perform_pending(lock)
        finally:
            if not lock.release():
                log.warning("lock for %s expired while processing; commits were still guarded by WATCH", self.run)
        if pending:
            self._draw_charts(lock)
        return self.summary

    def _hold(self, lock: RunLock) -> None:
        """Extend the run lock for the next step. Lost after a stall over `lock_timeout_s` (a paused process, a
        Redis outage): the commits so far stand (WATCH-guarded), and the turn ends as RunBusy, so that the
        run's feed entries stay pending and its next job finishes the work."""
        if not lock.extend():
            raise RunBusy(
                f"the run lock expired mid-turn (a stall over {fmt_duration(self.ctx.lock_timeout_s)}); "
                "the work committed stands, the rest is retried",
                run=self.run,
            )

    def _evaluate(self, lock: RunLock) -> bool:
        """Evaluate the log from the checkpoint on; returns whether actions are pending.

        Reads again only after a full page or after appending outputs (which must be read back:
        that is how a STOP becomes pending actions). Events appended after the last read are not
        missed: their feed entries find the run's `queued` flag cleared (before this job read), so
        the dispatcher gives them a job of their own."""
        while True:
            with watch_checkpoints(self.ctx.redis, self.keys, [self.run]) as tx:
                cp = decode_checkpoint(tx.read(self.run))
                turn = evaluate_next(self.ctx.store, self.policy, cp, run=self.run, host=self.ctx.host,
                                     clock=self.ctx.clock, count=PAGE)  # fmt: skip
                if turn is None:
                    return bool(cp.pending)
                entries, step, now = turn
                failpoint("before-commit", self.ctx.redis, self.keys)
                tx.begin()
                pipe = tx.pipeline
                self.ctx.store.append(step.outputs, pipeline=pipe)
                for bad in step.dead:
                    self.ctx.store.dead_letter(source=self.keys.log(self.run), sid=bad.sid, reason=bad.reason,
                                               fields=bad.fields, pipeline=pipe, run=self.run)  # fmt: skip
                written = encode_checkpoint(cp)
                tx.write(self.run, written.fields, written.drop)
                due = next_tick(cp, self.policy, self.ctx.ticks, wall_now=now)
                if due is None:
                    self.ctx.store.shared(pipe, self.run, "ZREM", self.keys.schedule(), self.run)
                else:
                    self.ctx.store.shared(pipe, self.run, "ZADD", self.keys.schedule(), repr(due), self.run)
                if not tx.commit():
                    log.info("checkpoint of %s moved under us; re-reading", self.run)
                    continue
            self.ctx.store.flush([self.run])
            failpoint("after-commit", self.ctx.redis, self.keys)
            for bad in step.dead:
                log.warning("dead-lettered entry %s of run %s: %s", bad.sid, self.run, bad.reason,
                            extra={"event_id": bad.sid})  # fmt: skip
            count_outputs(step.outputs, entries, now=self.ctx.clock())
            stop_breaker.settle_ended(self.ctx, entries)
            self.summary["events"] += len(entries)
            self.summary["outputs"] += len(step.outputs)
            self.summary["dead_letters"] += len(step.dead)
            if len(entries) < PAGE and not step.outputs:
                return bool(cp.pending)
            self._hold(lock)

    def _perform_pending(self, lock: RunLock) -> None:
        """Each pending action but the charts, in order; one another process carries out (`Awaiting`) stays
        pending, and is looked at once per turn: the turn never waits for it."""
        looked: set[str] = set()  # sids of the actions left awaiting in this turn
        while True:
            with watch_checkpoints(self.ctx.redis, self.keys, [self.run]) as tx:
                cp = decode_checkpoint(tx.read(self.run))
                first = next((i for i, a in enumerate(cp.pending)
                              if a["kind"] != ACTION_CHART and a["sid"] not in looked), None)  # fmt: skip
                if first is None:
                    return  # only charts are left (drawn once the lock is released), or actions awaiting others
                action: dict[str, Any] = cp.pending.pop(first)
                with log_context(event_id=action.get("id")):  # the event whose action this is (a decision, ...)
                    result = perform(self.ctx, self.run, cp, action, now=self.ctx.clock())
                awaiting = isinstance(result, Awaiting)
                if isinstance(result, Awaiting):
                    event = None
                    cp.pending.insert(first, result.action.to_dict())
                    looked.add(action["sid"])
                else:
                    event = result
                failpoint("after-action", self.ctx.redis, self.keys)
                # an action awaiting, or settled after awaiting, moves the run's tick: to its deadline, or off
                if not self._commit_action(tx, event, cp.pending, reschedule=awaiting or "due" in action):
                    continue
            self.ctx.store.flush([self.run])
            if event is not None and event.type in (t.STOP_DONE, t.STOP_FAILED):
                count("stops", outcome=event.type.rpartition(".")[2])
            self.summary["actions"] += 0 if awaiting else 1
            self._hold(lock)

    def _commit_action(self, tx: CheckpointTx, event: Event | None, pending: list[dict[str, Any]], *,
                       reschedule: bool = False) -> bool:  # fmt: skip
        """One action done, in one transaction on the WATCHed checkpoint: its event, and what is left pending;
        `reschedule`: the run's tick is when the first action awaiting another process is due, or none once
        none awaits (a run whose stop is under way is ticked for nothing else: workers/schedule.py).
        False when the checkpoint moved under us (nothing written)."""
        tx.begin()
        pipe = tx.pipeline
        if event is not None:
            self.ctx.store.append([event], pipeline=pipe)
        tx.write_pending(self.run, json.dumps(pending))
        due = awaiting_due(pending)
        if reschedule and due is not None:
            self.ctx.store.shared(pipe, self.run, "ZADD", self.keys.schedule(), repr(due), self.run)
        elif reschedule:
            self.ctx.store.shared(pipe, self.run, "ZREM", self.keys.schedule(), self.run)
        return tx.commit()

    def _draw_charts(self, lock: RunLock) -> None:
        """Draw the critical anomalies' charts outside the run's lock, so that a job bringing in a STOP never
        waits for matplotlib (a few hundred ms on a busy host); commit each under the lock, if it is still
        pending (a STOP read back drops it) and no other job holds the run (that job draws what is
        pending when it is done). Not while input not yet evaluated is in the log: its job comes first."""
        while True:
            cp = decode_checkpoint(read_checkpoint(self.ctx.redis, self.keys, self.run))
            action = next((a for a in cp.pending if a["kind"] == ACTION_CHART), None)
            if action is None or self._unread_input(cp.after):
                return
            drawn = perform(self.ctx, self.run, cp, action, now=self.ctx.clock())  # kept in Redis; idempotent
            event = None if isinstance(drawn, Awaiting) else drawn  # a chart is never handed to another process
            if not lock.acquire(blocking=False):
                return
            try:
                with watch_checkpoints(self.ctx.redis, self.keys, [self.run]) as tx:
                    current_cp = decode_checkpoint(tx.read(self.run))
                    if action not in current_cp.pending:
                        continue  # dropped, or drawn by another job meanwhile
                    current_cp.pending.remove(action)
                    if not self._commit_action(tx, event, current_cp.pending):
                        continue
            finally:
                if not lock.release():
                    log.warning("lock for %s expired while committing a chart; the commit was WATCHed", self.run)
            self.ctx.store.flush([self.run])
            self.summary["actions"] += 1

    def _unread_input(self, after: str | None) -> bool:
        """Whether the log holds entries the evaluation has not read, other than the workers' own results
        (the actions' events): a STOP may be waiting in them."""
        entries = self.ctx.store.read(self.run, after=after, count=PEEK)
        return any(isinstance(e, Malformed) or e.type not in t.WORKER_OUTPUT_TYPES for _, e in entries)


def count_outputs(outputs: Sequence[Event], inputs: Sequence[tuple[str, Event | Malformed]], *, now: float) -> None:
    """Decisions and the stops they ask for, by rule, and each decision's latency from its input (committed at
    `now`), for the Prometheus endpoint."""
    observe_decisions(outputs, inputs, now=now)
    for event in outputs:
        if event.type == t.DECISION:
            decided = cast(DecisionData, event.data)
            count("decisions", rule=str(decided.get("rule") or ""), decision=str(decided.get("decision")))
        elif event.type == t.STOP_REQUESTED:
            count("stop_requests", rule=str(cast(StopRequestedData, event.data).get("rule") or ""))

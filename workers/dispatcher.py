"""The dispatcher: feed entries in, at most one waiting job per run out.

It reads the feed through the `dispatch` consumer group. Entries that need work stay pending
until the job that covers them acknowledges them; entries a dead dispatcher or worker left
pending are claimed again after `reclaim_idle_ms` and given a new job. An entry that cannot be
parsed is dead-lettered and acknowledged, and the loop goes on. With a `Ticker`, it also appends
`tick` events to quiet runs whose next evaluation is due (workers/schedule.py).

A job (`process_runs`) covers up to `runs_per_job` runs, each processed as `process_run` would.
An RQ job costs a few milliseconds whatever it does (a fork, a dozen Redis commands), which at
1,000 runs sending once a second was most of the work; so while the queue holds waiting jobs
(the workers are busy anyway) runs that need a job are gathered for up to `linger_s` into fuller
jobs, and when the queue is empty for up to `idle_linger_s` (50 ms), spread over two jobs for
parallel workers. The per-run `queued` flags are set for a whole read in one pipelined round trip.

A run with an urgent feed entry (`u=1`: a NaN, a critical fault line, a stop asked for, a failed run;
events/urgency.py) is neither gathered nor held back: its job goes at once to the fast lane
(`<queue>-fast`, workers/lanes.py), which workers take before the normal queue, with whatever this
dispatcher had gathered for it. Its own `fast` flag dedups fast jobs as `queued` does normal ones. A
normal job of the run still waiting then finds the work done (the run lock and the WATCHed
checkpoint make it a no-op). A fast job that a worker took but did not begin within `fast_start_s` (the
worker paused while first in Redis's line) is dispatched again (workers/fast_watch.py).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from rq import Queue
from rq.job import Job
from trainwarden.events.errors import DecodeError, StoreUnavailable
from trainwarden.events.feed import (
    ALL_GROUPS,
    DISPATCH_GROUP,
    RECLAIM_IDLE_S,
    GroupReader,
    parse_feed_entry,
    trim_feed,
)
from trainwarden.events.flags import flag_queued
from trainwarden.events.loop import run_loop
from trainwarden.events.progress import mark_alive
from trainwarden.events.silence import Pulse, entry_lag
from trainwarden.events.store import EventStore, redis_errors
from trainwarden.events.types import WORKER_OUTPUT_TYPES
from trainwarden.workers import config
from trainwarden.workers.fast_watch import FastWatch
from trainwarden.workers.lanes import fast_lane
from trainwarden.workers.process import process_runs
from trainwarden.workers.schedule import Ticker

log = logging.getLogger(__name__)

DEFAULT_TRIM_INTERVAL_S = 2.0  # the feed grows ~1,000 entries/s at 1,000 runs x 1 Hz: keep only the unconsumed part
OUTBOX_SWEEP_S = 10.0  # Redis Cluster: how often outboxes a dead writer left are carried out
READ_COUNT = 1000
HEARTBEAT_INTERVAL_S = 1.0  # the bot's dead-man's switch reads it (bot/deadman.py)
RESULT_TTL_S = 0  # nobody reads a job's return value: RQ deletes a finished job at once (no result, no registry)
FAILURE_TTL_S = 7 * 24 * 3600
SPREAD_JOBS = 8  # reclaimed entries and fast jobs go out in at least this many jobs (while there are that many runs)
IDLE_SPREAD_JOBS = 2  # what an empty queue gets of the gathered runs: at least this many jobs (idle workers share them)

Work = list[tuple[str, list[str]]]  # (run, feed entry ids) per run, in the order they came


def chunk_runs(work: Work, *, runs_per_job: int, spread: int = 1) -> list[Work]:
    """Pure: split runs into jobs of at most `runs_per_job`, and into at least `spread` jobs while
    there are that many runs (so that idle workers share a burst)."""
    if not work:
        return []
    size = max(1, min(runs_per_job, len(work) // max(1, spread)))
    return [work[i : i + size] for i in range(0, len(work), size)]


@dataclass(slots=True)
class Gathering:
    """Runs whose `queued` flag this dispatcher set but whose job it has not enqueued yet."""

    work: dict[str, list[str]] = field(default_factory=dict)
    since: float = 0.0  # monotonic time of the oldest

    def add(self, run: str, fids: list[str], now: float) -> None:
        if not self.work:
            self.since = now
        self.work.setdefault(run, []).extend(fids)

    def items(self) -> Work:
        return list(self.work.items())


class Dispatcher:
    def __init__(
        self,
        *,
        store: EventStore,
        queue: Queue,
        consumer: str,
        reclaim_idle_ms: int = int(RECLAIM_IDLE_S * 1000),
        job_timeout_s: int = config.JOB_TIMEOUT_S,
        trim_interval_s: float = DEFAULT_TRIM_INTERVAL_S,
        ticker: Ticker | None = None,
        tick_check_s: float = config.TICK_CHECK_S,
        runs_per_job: int = config.RUNS_PER_JOB,
        linger_s: float = config.LINGER_S,
        idle_linger_s: float = config.IDLE_LINGER_S,
        pulse: Pulse | None = None,
        fast_queue: Queue | None = None,
        fast_start_s: float = config.FAST_START_S,
    ) -> None:
        self.store = store
        self.queue = queue
        self.fast_queue = fast_queue  # by default `queue`'s fast lane, made when first needed
        self.fast_watch = FastWatch(fast_queue, start_s=fast_start_s)  # fast jobs until seen begun
        self.reclaim_idle_ms = reclaim_idle_ms
        self.job_timeout_s = job_timeout_s
        self.trim_interval_s = trim_interval_s
        self.reader = GroupReader(store.redis, stream=store.keys.feed(), group=DISPATCH_GROUP, consumer=consumer)
        self._next_reclaim = 0.0
        self._next_trim = time.monotonic() + trim_interval_s
        self.ticker = ticker
        self.tick_check_s = tick_check_s
        self._next_tick_check = 0.0
        self._next_beat = 0.0
        self._next_sweep = 0.0
        self.runs_per_job = max(1, runs_per_job)
        self.linger_s = linger_s
        self.idle_linger_s = idle_linger_s
        self.gathering = Gathering()
        self.pulse = pulse  # heartbeat (feed lag) and the watch for silent components
        self.enqueued = 0  # jobs
        self.dispatched = 0  # runs in those jobs

    def setup(self) -> None:
        """Create every consumer group up front so that feed trimming never drops what a group has not seen."""
        for group in ALL_GROUPS:
            GroupReader(self.store.redis, stream=self.reader.stream, group=group, consumer="setup").ensure_group()

    def step(self, *, block_ms: int | None = None) -> int:
        """Handle what is there (waiting up to `block_ms` for new entries); returns entries handled."""
        handled = 0
        now = time.monotonic()
        if now >= self._next_beat:
            self._next_beat = now + HEARTBEAT_INTERVAL_S
            mark_alive(self.store.redis, self.store.keys, "dispatcher", time.time())
        if now >= self._next_reclaim:
            self._next_reclaim = now + self.reclaim_idle_ms / 2000
            handled += self._route(self.reader.claim_stale(min_idle_ms=self.reclaim_idle_ms), reclaimed=True)
        if self.ticker is not None and now >= self._next_tick_check:
            self._next_tick_check = now + self.tick_check_s
            handled += self.ticker.step()
        handled += self._redispatch_unstarted(now)
        if self.gathering.work and block_ms is not None:
            due = self.gathering.since + min(self.linger_s, self.idle_linger_s)
            block_ms = max(1, min(block_ms, int(1000 * (due - now))))
        if (look := self.fast_watch.next_due()) is not None and block_ms is not None:
            block_ms = max(1, min(block_ms, int(1000 * (look - now))))
        new = self.reader.read(count=READ_COUNT, block_ms=block_ms)
        handled += self._route(new, reclaimed=False)
        if self.pulse is not None:
            self.pulse.tick(lag_s=entry_lag(new))
        self._release(quiet=not new)
        if self.store.cluster and now >= self._next_sweep:
            self._next_sweep = now + OUTBOX_SWEEP_S
            self.store.outbox.sweep()
        if now >= self._next_trim:
            self._next_trim = now + self.trim_interval_s
            trimmed = trim_feed(self.store.redis, stream=self.reader.stream)
            if trimmed:
                log.debug("trimmed %d consumed feed entries", trimmed)
        return handled

    def run(self, *, burst: bool = False, stop: threading.Event | None = None) -> None:
        """Dispatch until `stop` is set; with `burst=True`, return when the feed has nothing new."""
        self.setup()
        try:
            passing = self.pulse.heartbeat.passing if self.pulse is not None else None
            run_loop(
                lambda block_ms: self.step(block_ms=block_ms),
                name="dispatcher",
                burst=burst,
                stop=stop,
                passing=passing,
            )
        finally:
            # what is left pending without a job is claimed again by the next dispatcher anyway
            with contextlib.suppress(StoreUnavailable):
                self._release_gathered(spread=1)

    def _route(self, entries: Sequence[tuple[str, dict[bytes, bytes]]], *, reclaimed: bool) -> int:
        work: dict[str, list[str]] = {}
        urgent: set[str] = set()
        ack_now: list[str] = []
        for fid, fields in entries:
            try:
                entry = parse_feed_entry(fid, fields)
            except DecodeError as exc:
                self.store.dead_letter(source=self.reader.stream, sid=fid, reason=str(exc), fields=fields)
                run = fields.get(b"r", b"").decode("utf-8", "replace") or None
                log.warning("dead-lettered feed entry %s: %s", fid, exc, extra={"run": run, "event_id": fid})
                ack_now.append(fid)
                continue
            if entry.types <= WORKER_OUTPUT_TYPES:
                ack_now.append(fid)
            else:
                work.setdefault(entry.run, []).append(fid)
                if entry.urgent:
                    urgent.add(entry.run)
        if urgent:
            ack_now.extend(self._send_fast({run: work.pop(run) for run in list(work) if run in urgent},
                                           reclaimed=reclaimed))  # fmt: skip
        if work:
            flagged = self._flag(list(work), reclaimed=reclaimed)
            now = time.monotonic()
            fresh: Work = []
            for run, fids in work.items():
                if run in flagged:
                    fresh.append((run, fids))
                elif not reclaimed:
                    ack_now.extend(fids)  # the waiting job has not started reading yet, so it will see these events
                # reclaimed entries of a run with a waiting job stay pending and are looked at again later
            if reclaimed:
                if fresh:
                    log.info("re-dispatching stale feed entries of %d run(s)", len(fresh))
                self._enqueue_jobs(fresh, spread=SPREAD_JOBS)
            else:
                for run, fids in fresh:
                    self.gathering.add(run, fids, now)
        self.reader.ack(ack_now)
        return len(entries)

    def _send_fast(self, work: dict[str, list[str]], *, reclaimed: bool) -> list[str]:
        """Enqueue runs with an urgent entry in the fast lane now, each with what was gathered for it;
        returns the entries a fast job already waiting covers (to acknowledge now)."""
        flagged = self._flag(list(work), reclaimed=reclaimed, fast=True)
        jobs: Work = []
        covered: list[str] = []
        for run, fids in work.items():
            if run in flagged:
                jobs.append((run, self.gathering.work.pop(run, []) + fids))
            elif not reclaimed:
                covered.extend(fids)
        enqueued = self._enqueue_jobs(jobs, spread=SPREAD_JOBS, queue=self._fast_lane())
        self.fast_watch.add(enqueued, time.monotonic())
        return covered

    def _fast_lane(self) -> Queue:
        if self.fast_queue is None:
            self.fast_queue = self.fast_watch.queue = fast_lane(self.queue)
        return self.fast_queue

    def _redispatch_unstarted(self, now: float) -> int:
        """A copy, at the front of the fast lane, of each fast job a worker took but has not begun; runs sent."""
        runs = 0
        for lost in self.fast_watch.unstarted(now):
            work = lost.work
            log.warning("fast-lane job %s (%s) was taken by a worker that has not begun it in %.1fs (paused?); "
                        "dispatching it again", lost.job.id, _describe(work), now - lost.since)  # fmt: skip
            copies = self._enqueue_jobs(work, spread=1, queue=self._fast_lane(), at_front=True)
            self.fast_watch.add(copies, now, copies=lost.copies + 1)
            runs += len(work)
        return runs

    def _flag(self, runs: list[str], *, reclaimed: bool, fast: bool = False) -> set[str]:
        """Set the runs' `queued` flags (`fast` ones for the fast lane) in one round trip; returns the runs
        this call flagged (events/flags.py: SET NX for new entries; for reclaimed ones, where the flag is gone).
        """
        ttl = max(1, self.reclaim_idle_ms // 1000) * 2
        return flag_queued(self.store.redis, self.store.keys, runs, fast=fast, ttl_s=ttl, reclaimed=reclaimed)

    def _release(self, *, quiet: bool) -> None:
        """Enqueue the gathered runs once a job's worth is there, the feed went quiet, or the oldest waited
        `idle_linger_s` while the queue is empty (workers may be idle: over at least two jobs) or
        `linger_s` while it is not (in full jobs). The short wait on an empty queue is what keeps jobs
        full at a steady 1,000 events/s: sent at once, each read's few runs made jobs of 1-3 runs, each
        paying RQ's per-job cost (bench/load.py: 1.1 ms of worker CPU an event against 0.7-0.8 with
        the wait). Urgent runs do not wait: they go to the fast lane as they are read."""
        gathered = self.gathering.work
        if not gathered:
            return
        with redis_errors("measure the job queue"):
            hungry = self.queue.count == 0
        linger = self.idle_linger_s if hungry else self.linger_s
        if quiet or len(gathered) >= self.runs_per_job or time.monotonic() - self.gathering.since >= linger:
            self._release_gathered(spread=IDLE_SPREAD_JOBS if hungry else 1)

    def _release_gathered(self, *, spread: int) -> None:
        self._enqueue_jobs(self.gathering.items(), spread=spread)
        self.gathering.work.clear()  # only once enqueued: after a failure they go out with the next try

    def _enqueue_jobs(self, work: Work, *, spread: int, queue: Queue | None = None,
                      at_front: bool = False) -> list[Job]:  # fmt: skip
        jobs = chunk_runs(work, runs_per_job=self.runs_per_job, spread=spread)
        if not jobs:
            return []
        datas = [
            Queue.prepare_data(
                process_runs,
                args=([[run, fids] for run, fids in job],),
                timeout=self.job_timeout_s,
                result_ttl=RESULT_TTL_S,
                failure_ttl=FAILURE_TTL_S,
                description=_describe(job),
                at_front=at_front,
            )
            for job in jobs
        ]
        with redis_errors("enqueue jobs"):
            enqueued = (queue or self.queue).enqueue_many(datas)  # one pipeline for all of them
        self.enqueued += len(jobs)
        self.dispatched += len(work)
        return enqueued


def _describe(job: Work) -> str:
    runs = [run for run, _ in job]
    shown = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
    return f"process run{'s' if len(runs) > 1 else ''} {shown}"

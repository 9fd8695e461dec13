"""The dispatcher: feed entries in, at most one waiting `process_run` job per run out.

It reads the feed through the `dispatch` consumer group. Entries that need work stay pending
until the job that covers them acknowledges them; entries a dead dispatcher or worker left
pending are claimed again after `reclaim_idle_ms` and given a new job. An entry that cannot be
parsed is dead-lettered and acknowledged, and the loop goes on. With a `Ticker`, it also appends
`tick` events to quiet runs whose next evaluation is due (workers/schedule.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from rq import Queue

from events.errors import DecodeError
from events.feed import ALL_GROUPS, DISPATCH_GROUP, GroupReader, parse_feed_entry, trim_feed
from events.loop import run_loop
from events.store import EventStore, redis_errors
from events.types import WORKER_OUTPUT_TYPES
from workers.process import process_run
from workers.schedule import Ticker

log = logging.getLogger(__name__)

DEFAULT_RECLAIM_IDLE_MS = 30_000
DEFAULT_JOB_TIMEOUT_S = 600
DEFAULT_TRIM_INTERVAL_S = 30.0
OUTBOX_SWEEP_S = 10.0  # Redis Cluster: how often outboxes a dead writer left are carried out
DEFAULT_TICK_CHECK_S = 5.0
READ_COUNT = 1000
HEARTBEAT_INTERVAL_S = 1.0  # the bot's dead-man's switch reads it (bot/deadman.py)
RESULT_TTL_S = 60
FAILURE_TTL_S = 7 * 24 * 3600


class Dispatcher:
    def __init__(
        self,
        *,
        store: EventStore,
        queue: Queue,
        consumer: str,
        reclaim_idle_ms: int = DEFAULT_RECLAIM_IDLE_MS,
        job_timeout_s: int = DEFAULT_JOB_TIMEOUT_S,
        trim_interval_s: float = DEFAULT_TRIM_INTERVAL_S,
        ticker: Ticker | None = None,
        tick_check_s: float = DEFAULT_TICK_CHECK_S,
    ) -> None:
        self.store = store
        self.queue = queue
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
        self.enqueued = 0

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
            with redis_errors("write the dispatcher's heartbeat"):
                self.store.redis.set(self.store.keys.heartbeat("dispatcher"), repr(time.time()))
        if now >= self._next_reclaim:
            self._next_reclaim = now + self.reclaim_idle_ms / 2000
            handled += self._route(self.reader.claim_stale(min_idle_ms=self.reclaim_idle_ms), reclaimed=True)
        if self.ticker is not None and now >= self._next_tick_check:
            self._next_tick_check = now + self.tick_check_s
            handled += self.ticker.step()
        handled += self._route(self.reader.read(count=READ_COUNT, block_ms=block_ms), reclaimed=False)
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
        run_loop(lambda block_ms: self.step(block_ms=block_ms), name="dispatcher", burst=burst, stop=stop)

    def _route(self, entries: Sequence[tuple[str, dict[bytes, bytes]]], *, reclaimed: bool) -> int:
        work: dict[str, list[str]] = {}
        ack_now: list[str] = []
        for fid, fields in entries:
            try:
                entry = parse_feed_entry(fid, fields)
            except DecodeError as exc:
                self.store.dead_letter(source=self.reader.stream, sid=fid, reason=str(exc), fields=fields)
                log.warning("dead-lettered feed entry %s: %s", fid, exc)
                ack_now.append(fid)
                continue
            if entry.types <= WORKER_OUTPUT_TYPES:
                ack_now.append(fid)
            else:
                work.setdefault(entry.run, []).append(fid)
        for run, fids in work.items():
            if not self._enqueue(run, fids, reclaimed=reclaimed):
                ack_now.extend(fids)
        self.reader.ack(ack_now)
        return len(entries)

    def _enqueue(self, run: str, fids: list[str], *, reclaimed: bool) -> bool:
        """Enqueue a job for `run` covering `fids`; False when a waiting job already covers them."""
        queued = self.store.keys.queued(run)
        ttl = max(1, self.reclaim_idle_ms // 1000) * 2
        if reclaimed:
            if self.store.redis.exists(queued):
                return True  # a job is waiting; these stay pending and are looked at again later
            log.info("re-dispatching %d stale feed entries of %s", len(fids), run)
            self.store.redis.set(queued, "1", ex=ttl)
        elif not self.store.redis.set(queued, "1", nx=True, ex=ttl):
            return False  # the waiting job has not started reading yet, so it will see these events
        self.queue.enqueue(
            process_run,
            run,
            fids,
            job_timeout=self.job_timeout_s,
            result_ttl=RESULT_TTL_S,
            failure_ttl=FAILURE_TTL_S,
            description=f"process run {run}",
        )
        self.enqueued += 1
        return True

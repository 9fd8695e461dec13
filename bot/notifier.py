"""The notifier: feed in, the few messages a person needs out, each posted exactly once.

It reads the feed through its own consumer group (`notify`) under a stable consumer name, so a
restarted notifier first finishes what it had read (its own pending entries) in order. For each
run it keeps a checkpoint (`tw:{run}:notify`: how far it has folded the run's log and the
noise-control state of bot/stages.py, kept by events/notify_state.py) written after each feed
entry; the notices noise control lets through go down the rest of the notify path, bot/notify_path.py
(route, render, rate-limit, deliver, follow-ups). A Slack outage leaves the entry pending and the
run's state is reloaded from its checkpoint, so nothing is skipped and nothing is counted twice.

A STOP the stop breaker may hold waits for its outcome (bot/stop_outcome.py): the run's fold stops before it,
the checkpoint says where (`held_back`, read on from there by the run's next entry), and its feed entry stays
pending, read again when its wait is over, so a restart or a standby taking over loses nothing.

Only the holder of the notifier lease notifies (bot/keeper.py): a second notifier stands by, and a
holder whose lease was taken over (it was paused past it) has its checkpoint and notification
writes refused by the fence (`LeaseLost`), forgets what it had in memory and stands by again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import cast

from trainwarden.bot import messages, routing
from trainwarden.bot.attachments import anomaly_chart, pack_files
from trainwarden.bot.breaker_notice import BreakerNotice
from trainwarden.bot.config import KEEP_RUNNING_SNOOZE_S, STOP_OUTCOME_WAIT_S, Route
from trainwarden.bot.deadman import Deadman
from trainwarden.bot.delivery import Delivery
from trainwarden.bot.errors import SlackRejected, SlackUnavailable
from trainwarden.bot.follow_ups import FollowUps
from trainwarden.bot.keeper import Keeper, stand_by
from trainwarden.bot.notify_path import NotifyPath
from trainwarden.bot.rate import RateLimit, RateLimiter
from trainwarden.bot.sink import Message, Sink
from trainwarden.bot.stages import FLAPPING, GUARD, INPUT_TYPES, Notice, NotifyState, Pipeline
from trainwarden.bot.stop_outcome import FaultRules, held_quiet, turn_start, unsettled
from trainwarden.core.logcontext import log_context
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.errors import DecodeError, LeaseLost
from trainwarden.events.faults import failpoint
from trainwarden.events.feed import NOTIFY_GROUP, RECLAIM_IDLE_S, FeedEntry, GroupReader, parse_feed_entry
from trainwarden.events.heartbeat import SILENT_INTERVALS, Liveness
from trainwarden.events.lease import Lease, Unfenced
from trainwarden.events.loop import run_loop
from trainwarden.events.notify_state import Checkpoint, NotifyStateRepo
from trainwarden.events.payloads import AnomalyChartedData, AnomalyOpenedData, DecisionData
from trainwarden.events.projection import RunState
from trainwarden.events.redis_types import Pipeline as RedisPipeline
from trainwarden.events.run_view import run_state as read_run_state
from trainwarden.events.sids import sid_key
from trainwarden.events.silence import Pulse, entry_lag
from trainwarden.events.store import EventStore, Malformed

log = logging.getLogger(__name__)

TREND_POINTS = 20
TRENDED = frozenset({t.ANOMALY_OPENED, FLAPPING, t.WAIT, t.STOP, GUARD, t.DECISION_SHADOW})


class Notifier:
    def __init__(
        self,
        *,
        store: EventStore,
        sink: Sink,
        consumer: str,
        channel: str,
        host: str,
        pipeline: Pipeline,
        routes: Sequence[Route] = (),
        snooze_s: float = KEEP_RUNNING_SNOOZE_S,
        reclaim_idle_ms: int = int(RECLAIM_IDLE_S * 1000),
        deadman: Deadman | None = None,
        pulse: Pulse | None = None,
        lease: Lease | None = None,
        liveness: Liveness | None = None,
        limiter: RateLimiter | None = None,
        stop_outcome_wait_s: float = STOP_OUTCOME_WAIT_S,
    ) -> None:
        self.store = store
        self.sink = sink
        self.channel = channel  # the default channel (slack.channel)
        self.routes = tuple(routes)
        self.pipeline = pipeline
        self.snooze_s = snooze_s
        self.reclaim_idle_ms = reclaim_idle_ms
        self.deadman = deadman
        self.pulse = pulse  # heartbeat (feed lag) and the watch for silent components
        self.lease = lease  # None: the only notifier (a test, a tool); no standby, no fence
        self.fence: Lease | Unfenced = lease if lease is not None else Unfenced(store.redis)
        stale_s = SILENT_INTERVALS * (pulse.heartbeat.interval_s if pulse is not None else 10.0)
        self.liveness = liveness or Liveness(stale_s)
        self.delivery = Delivery(store=store, sink=sink, host=host, fence=self.fence)
        self.checkpoints = NotifyStateRepo(store.redis, store.keys)
        # a Slack sink's own bucket (bot/rate.py): the rate-limit stage takes each notification's turn in it
        limiter = limiter if limiter is not None else getattr(sink, "limiter", None)
        self.path = NotifyPath(delivery=self.delivery, rate=RateLimit(limiter, liveness=self.liveness),
                               follow_ups=FollowUps(sink=sink, delivery=self.delivery))  # fmt: skip
        self.breaker = BreakerNotice(store=store, sink=sink, delivery=self.delivery, rate=self.path.rate,
                                     fence=self.fence, channel=channel)  # fmt: skip
        self.reader = GroupReader(store.redis, stream=store.keys.feed(), group=NOTIFY_GROUP, consumer=consumer)
        self.states: dict[str, tuple[NotifyState, str | None]] = {}  # run -> (state, folded up to)
        self.suppressed: Counter[str] = Counter()  # why notices were dropped (for tests and logs)
        self._own_pending = True  # re-read what this consumer had read but not finished first
        self._next_reclaim = 0.0
        self._held_at_exit = False
        self._burst = False
        self.stop_outcome_wait_s = stop_outcome_wait_s
        self.fault_rules = FaultRules(store)
        self._waiting: dict[str, float] = {}  # feed id -> when (monotonic) it is read again: a STOP's wait is over
        self._waiting_run: dict[str, str] = {}  # feed id -> its run: read again at once when the run's fold is through
        self._first_seen: dict[str, float] = {}  # STOP decision id -> when (monotonic) this notifier first saw it

    # -- loop -------------------------------------------------------------------------------------

    def step(self, *, block_ms: int | None = None) -> int:
        self.liveness.progress()
        if self.lease is not None and not self.lease.held:
            self.lease.check()  # raises LeaseLost: the keeper could not renew it
        if self.deadman is not None:
            self.deadman.check()
        entries: list[tuple[str, dict[bytes, bytes]]] = []
        now = time.monotonic()
        if self._waiting and min(self._waiting.values()) <= now:
            self._own_pending = True  # a STOP's wait for its outcome is over: its entry is read again
        if self._own_pending:  # less the entries still waiting (they stay pending)
            entries = [e for e in self.reader.read_own_pending() if self._waiting.get(e[0], 0.0) <= now]
            self._own_pending = bool(entries)
        if not entries and now >= self._next_reclaim:
            self._next_reclaim = now + self.reclaim_idle_ms / 2000
            entries = self.reader.claim_stale(min_idle_ms=self.reclaim_idle_ms)
        if entries:
            return self._consume(entries, fresh=False)
        # Entries delivered for the first time: no notifier has tried them, so no status to read.
        new = self.reader.read(block_ms=block_ms)
        self.liveness.progress()
        if self.pulse is not None:
            self.pulse.note(entry_lag(new))
        return self._consume(new, fresh=True)

    def run(self, *, burst: bool = False, stop: threading.Event | None = None) -> None:
        """Notify until `stop` (or, with `burst`, until nothing is pending), while holding the lease;
        the lease is released on the way out, so a standby takes over at once."""
        stop = stop or threading.Event()
        ended = threading.Event()
        self._burst = burst  # a one-shot posts what is there: no STOP waits for an outcome it would not see
        self.reader.ensure_group()
        keeper = Keeper(lease=self.lease, pulse=self.pulse, liveness=self.liveness).start(ended)
        try:
            while not stop.is_set():
                if self.lease is not None and not stand_by(self.lease, stop, burst=burst):
                    return
                self.liveness.progress()
                try:
                    run_loop(lambda block_ms: self.step(block_ms=block_ms), name="notifier", burst=burst, stop=stop)
                    return
                except LeaseLost as exc:
                    if burst:
                        raise
                    log.warning("%s", exc)
                    self._forget()
        finally:
            ended.set()
            keeper.join(timeout=5)  # no beat of it lands after `stopped()`
            self._release()

    def _forget(self) -> None:
        """After losing the lease: nothing in memory is trusted; the next holding starts from the checkpoints."""
        self.states.clear()
        self._waiting.clear()
        self._waiting_run.clear()
        self.delivery.forget()
        self._own_pending = True

    def _release(self) -> None:
        self._held_at_exit = self.lease is None or self.lease.token is not None
        if self.lease is not None and self.lease.token is not None:
            try:
                self.lease.release()
            except Exception as exc:  # it lapses by itself
                log.warning("could not release the notifier lease (%s); a standby takes over when it lapses", exc)

    def stopped(self) -> None:
        """Record that the operator stopped this notifier (SIGTERM, Ctrl-C), so nobody takes it for silent
        (a standby writes no heartbeat: the holder's, maybe of this host, is not its to mark)."""
        if self.pulse is not None and self._held_at_exit:
            self.pulse.heartbeat.stopped()

    def _consume(self, entries: Sequence[tuple[str, dict[bytes, bytes]]], *, fresh: bool) -> int:
        """Handle entries in order; acknowledge those done in one call (a redelivery is a no-op:
        the checkpoint says how far each run was folded)."""
        done: list[str] = []
        try:
            for fid, fields in entries:
                try:
                    entry = parse_feed_entry(fid, fields)
                except DecodeError:
                    done.append(fid)  # the dispatcher dead-letters it
                    continue
                if entry.types & INPUT_TYPES:
                    try:
                        with log_context(run=entry.run, event_id=entry.last):  # its lines name the run
                            if not self._handle_entry(entry, fresh=fresh):
                                continue  # a STOP waits for its outcome: the entry stays pending
                    except (SlackUnavailable, SlackRejected) as exc:
                        if isinstance(exc, SlackRejected) and not exc.setup:
                            raise  # bot/delivery.py handles refusals of one message; anything else is a bug
                        self.delivery.flush()  # what was posted before the outage stays recorded
                        # an outage is said once by the sink (its start, then its end with its duration)
                        level = logging.DEBUG if isinstance(exc, SlackUnavailable) else logging.WARNING
                        log.log(level, "Slack unavailable (%s); %s stays pending and is retried", exc, fid,
                                extra={"run": entry.run, "event_id": entry.last})  # fmt: skip
                        self.states.pop(entry.run, None)  # reload from the checkpoint: nothing counted twice
                        self._own_pending = True
                        pause = min(5.0, self.reclaim_idle_ms / 10000)
                        with self.liveness.waiting(f"retrying in {pause:.0f} s: Slack unavailable ({exc})", pause):
                            time.sleep(pause)
                        break
                self._waiting.pop(fid, None)
                self._waiting_run.pop(fid, None)
                done.append(fid)
        finally:
            self.reader.ack(done)
        return len(done)

    # -- per run ----------------------------------------------------------------------------------

    def _load(self, run: str) -> tuple[NotifyState, str | None]:
        if run not in self.states:
            saved = self.checkpoints.checkpoint(run)
            if saved is not None:
                self.states[run] = (NotifyState.from_dict(saved.state, channel=self.channel), saved.after)
            else:
                self.states[run] = (NotifyState(), None)
        return self.states[run]

    def _handle_entry(self, entry: FeedEntry, *, fresh: bool) -> bool:
        """Fold the run's log up to `entry` and post what it needs; False when the fold stopped before a STOP
        that waits for its outcome (the entry is then left pending)."""
        state, after = self._load(entry.run)
        if state.held_back is not None:  # the fold stopped there: read on from it, whatever the entry
            if sid_key(state.held_back) > sid_key(entry.last):
                return True
            fresh = False  # an earlier try may have posted some of it (another notifier's, before a takeover)
            items = list(self.store.iter_run(entry.run, start=state.held_back, until=entry.last))
        elif after is not None and sid_key(after) >= sid_key(entry.last):
            return True  # folded before a crash, not yet acknowledged
        elif after is not None and sid_key(after) >= sid_key(entry.first):
            items = list(self.store.iter_run(entry.run, after=after, until=entry.last))
        else:
            items = list(self.store.iter_run(entry.run, start=entry.first, until=entry.last))
        cut = self._cut(entry, items)
        if cut is not None:
            if cut == 0 and state.held_back is not None:
                return False  # still waiting where it stopped: nothing new to fold
            held_back, items = items[cut][0], items[:cut]
        held = held_quiet(items)
        state.held_back = None
        run_state: list[RunState] = []  # the run's view, read once per entry when needed
        for _sid, item in items:
            if isinstance(item, Malformed):
                continue
            self._first_seen.pop(item.id, None)
            notice, reason = self.pipeline.process(state, item, held=item.id in held)
            if notice is not None:
                if notice.kind in TRENDED and not run_state:
                    run_state.append(read_run_state(self.store, entry.run))
                trend = trend_of(notice, run_state[0]) if notice.kind in TRENDED else None
                self.path.post(state, notice, tree=routing.tree(self.routes, default=self.channel), trend=trend,
                               snooze_s=self.snooze_s, fresh=fresh)  # fmt: skip
            elif messages.notification_builder(item) is not None:
                self.suppressed[reason] += 1
            elif item.type == t.RUN_FINISHED:
                self.path.follow_ups.finished(state, item)  # posts nothing, closes the run's parent
            elif item.type == t.STOP_HELD:
                self.breaker.held(item, fresh=fresh)  # one message for every held STOP (bot/breaker_notice.py)
            if item.type in (t.EVIDENCE_BUILT, t.EVIDENCE_FAILED) and item.id not in held:
                self._share_pack(state, item, fresh=fresh)
            elif item.type == t.ANOMALY_CHARTED:
                self._share_chart(state, item, fresh=fresh)
        if cut is not None:
            state.held_back = held_back
        self.states[entry.run] = (state, entry.last)
        checkpoint = Checkpoint(after=entry.last, state=state.to_dict())

        def write(pipe: RedisPipeline) -> None:
            self.delivery.flush(pipe)  # the results of this entry's posts, with the checkpoint
            self.checkpoints.save_checkpoint(entry.run, checkpoint, pipeline=pipe)

        self.fence.transaction(write, what=f"write the notifier's checkpoint of {entry.run}")
        self.store.flush([entry.run])  # the outbox maps its own Redis errors (events/outbox.py)
        self.liveness.progress()
        failpoint("notify-after-sent", self.store.redis, self.store.keys)
        if cut is None:  # the run's entries left waiting are folded now: acknowledged on the next step
            self._waiting.update({fid: 0.0 for fid, run in self._waiting_run.items() if run == entry.run})
        return cut is None

    def _cut(self, entry: FeedEntry, items: list[tuple[str, Event | Malformed]]) -> int | None:
        """Where the fold stops: before the first STOP in `items` that the breaker may hold and that still waits
        for its outcome (its anomaly's opening first); None when none does. Notes when to read `entry` again."""
        wall, now = time.time(), time.monotonic()
        for i in unsettled(items):
            decision = cast(Event, items[i][1])
            seen = self._first_seen.setdefault(decision.id, now)
            left = min(decision.ts + self.stop_outcome_wait_s - wall, seen + self.stop_outcome_wait_s - now)
            if left <= 0 or self._burst or self.fault_rules.fault(decision):
                continue  # waited long enough (workers down?), or a fault's STOP: posted now
            self._waiting[entry.fid], self._waiting_run[entry.fid] = now + left, entry.run
            return turn_start(items, i)
        return None

    def destination(self, labels: routing.Labels) -> routing.Destination:
        return routing.route(self.routes, labels, default=self.channel)

    def _share_pack(self, state: NotifyState, event: Event, *, fresh: bool) -> None:
        """The STOP's chart (and report) into the run's thread where the STOP went (bot/attachments.py)."""
        self._upload(state, event, kind=event.type, fresh=fresh, files=lambda: pack_files(self.store, event),
                     text=lambda names: messages.pack_shared(event, names))  # fmt: skip

    def _share_chart(self, state: NotifyState, event: Event, *, fresh: bool) -> None:
        """A critical anomaly's chart into the thread where its ANOMALY message went; only while that message is
        the rule's posted opening (not snoozed, inhibited, deduplicated or resolved meanwhile)."""
        charted = cast(AnomalyChartedData, event.data)
        if state.posted_open.get(charted.get("rule") or "") != charted.get("anomaly"):
            self.suppressed["chart-unposted"] += 1
            return
        self._upload(state, event, kind=t.ANOMALY_OPENED, fresh=fresh, files=lambda: anomaly_chart(self.store, event),
                     text=lambda _names: messages.anomaly_charted(event))  # fmt: skip

    def _upload(
        self,
        state: NotifyState,
        event: Event,
        *,
        kind: str,
        fresh: bool,
        files: Callable[[], tuple[tuple[str, bytes], ...]],
        text: Callable[[list[str]], str],
    ) -> None:
        """Share files in the run's thread of the channel a `kind` message about `event` is routed to; once."""
        key = f"{event.id}:files"
        status = None if fresh else self.delivery.status(event.run, key)
        if status is not None and status["state"] != "intent":
            return  # shared (or refused) before a crash
        shared = files()
        if not shared:
            return
        channel = self.destination(routing.labels(kind, event, state)).channel
        message = Message(key=key, run=event.run, channel=channel, text=text([name for name, _ in shared]),
                          thread_ts=state.threads.get(channel), files=shared)  # fmt: skip
        self.delivery.upload(message, status=status)


def trend_of(notice: Notice, state: RunState) -> tuple[str, list[float]] | None:
    """The recent values of the metric the notice is about, oldest first, from the run's view (its
    bounded window of recent metrics), so no scan of the log back from the anomaly is needed."""
    values = cast(AnomalyOpenedData | DecisionData, notice.event.data).get("values") or {}
    name = next((k for k, v in values.items() if k != "step" and isinstance(v, int | float)), None)
    if name is None:
        return None
    points = [float(m[name]) for m in state.recent_metrics if isinstance(m.get(name), int | float)]
    return (name, points[-TREND_POINTS:]) if points else None

"""Dead-man's switch for trainwarden itself: is the dispatcher alive, are the workers keeping up?

Stalled when the dispatcher's heartbeat (`tw:heartbeat:dispatcher`, written once a second by its
loop) is older than `stall_s`, or when the oldest feed entry still pending in the `dispatch` group
(waiting for a worker's job to finish it) is older than `stall_s`. The switch appends one
`watchdog.stalled` event to the `trainwarden.system` log when that starts and one
`watchdog.recovered` when it ends; the notifier posts them like any other event.

Ages are counted from this switch's start at the earliest: what happened while the notifier itself
was down (a planned restart of every daemon: the dispatcher's old heartbeat, feed entries waiting
for workers that are starting too) is given `stall_s` to resume before it counts as a stall.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import cast

from trainwarden.bot import watcher_messages
from trainwarden.bot.stages import SYSTEM_RUN
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event, time_seq
from trainwarden.events.feed import DISPATCH_GROUP
from trainwarden.events.history import newest_first
from trainwarden.events.payloads import WatchdogRecoveredData, WatchdogStalledData
from trainwarden.events.progress import backlog, last_alive
from trainwarden.events.store import EventStore, Malformed, decode_entries

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 5.0
DISPATCHER = "dispatcher"


class Deadman:
    def __init__(
        self,
        *,
        store: EventStore,
        host: str,
        stall_s: float,
        clock: Callable[[], float] = time.time,
        interval_s: float = CHECK_INTERVAL_S,
    ) -> None:
        self.store = store
        self.host = host
        self.stall_s = stall_s
        self.clock = clock
        self.interval_s = interval_s
        self._next = 0.0
        self.started = clock()
        self._stalled_since: float | None = self._last_stall()

    def _last_stall(self) -> float | None:
        """Whether the system log's last watchdog event says stalled (a restarted bot does not repeat it)."""
        entries = newest_first(
            self.store.redis, self.store.keys, SYSTEM_RUN, count=200, what="read the watchdog's state"
        )
        for _sid, item in decode_entries(entries, SYSTEM_RUN):
            if isinstance(item, Malformed):
                continue
            if item.type == t.WATCHDOG_STALLED:
                return float(cast(WatchdogStalledData, item.data).get("since", item.ts))
            if item.type == t.WATCHDOG_RECOVERED:
                return None
        return None

    def diagnose(self, now: float) -> str | None:
        """What is stuck, or None when everything makes progress."""
        beat = last_alive(self.store.redis, self.store.keys, DISPATCHER)
        behind = backlog(self.store.redis, self.store.keys, DISPATCH_GROUP)  # none: no dispatcher ever ran
        if beat is None:  # give a dispatcher started alongside the bot time to report
            return watcher_messages.no_dispatcher() if now - self.started > self.stall_s else None
        if now - max(beat, self.started) > self.stall_s:
            return watcher_messages.dispatcher_silent(now - beat)
        if behind.pending and behind.oldest is not None:
            waited = now - int(behind.oldest.partition("-")[0]) / 1000
            if now - max(now - waited, self.started) > self.stall_s:
                return watcher_messages.workers_behind(behind.pending, waited)
        return None

    def check(self) -> None:
        now = self.clock()
        if now < self._next:
            return
        self._next = now + self.interval_s
        problem = self.diagnose(now)
        if problem is not None and self._stalled_since is None:
            log.error("trainwarden stalled: %s", problem)
            stalled: WatchdogStalledData = {"detail": problem, "since": now}
            self._append(t.WATCHDOG_STALLED, stalled, now)
            self._stalled_since = now
        elif problem is None and self._stalled_since is not None:
            recovered: WatchdogRecoveredData = {
                "detail": watcher_messages.progress_again(),
                "stalled_s": now - self._stalled_since,
            }
            self._append(t.WATCHDOG_RECOVERED, recovered, now)
            self._stalled_since = None

    def _append(self, event_type: str, data: Mapping[str, object], now: float) -> None:
        event = make_event(event_type, run=SYSTEM_RUN, host=self.host, producer=f"watchdog/{self.host}",
                           seq=time_seq(), data=data, ts=now)  # fmt: skip
        self.store.append_one(event)

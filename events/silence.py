"""Watching the watchdog: one `component.silent` event when a daemon's heartbeat goes quiet, one
`component.recovered` when it beats again, whichever process notices first.

The dispatcher, the workers and the notifier each run `SilenceWatch.check` at their heartbeat
interval, so a dead notifier is noticed by the dispatcher (its events wait in the system log and are
posted when a notifier runs again) and a dead dispatcher by the workers or the notifier. Several
observers agree on one event per transition without a lock: the silence of a component is named by
the time of its last beat `T`, and the events are appended with producer `watchdog/<component>` and
seq `2T+1` (silent) and `2T+2` (recovered, T being the silence it ends); the event log stores a
(producer, seq) once, so a second observer's append is a no-op. The hash `tw:silent` (component ->
T) remembers which components are silent now; a crash between the append and that write only
repeats a no-op append.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.heartbeat import Beat, Heartbeat, read_beats
from trainwarden.events.payloads import ComponentRecoveredData, ComponentSilentData
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.store import EventStore

log = logging.getLogger(__name__)


def transition_seq(last_beat_ts: float, *, recovered: bool) -> int:
    """Pure: the seq every observer gives the same transition (see the module docstring)."""
    return round(last_beat_ts * 1_000_000) * 2 + (2 if recovered else 1)


class SilenceWatch:
    def __init__(self, *, store: EventStore, host: str, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.host = host
        self.clock = clock

    def check(self) -> int:
        """Compare every component's last beat with what is recorded as silent; returns events appended."""
        now = self.clock()
        r: Any = self.store.redis
        key = self.store.keys.silent()
        with redis_errors("read the heartbeats"):
            beats = {b.component: b for b in read_beats(r, self.store.keys)}
            marked = {k.decode(): float(v) for k, v in r.hgetall(key).items()}
        made = 0
        for component, beat in beats.items():
            since = marked.get(component)
            if beat.silent(now) and since != beat.ts:
                made += self._silent(beat, now)
                with redis_errors("record a silent component"):
                    r.hset(key, component, repr(beat.ts))
            elif since is not None and not beat.silent(now) and beat.ts > since:
                made += self._recovered(beat, since, now)
                with redis_errors("record a recovered component"):
                    r.hdel(key, component)
        for component in set(marked) - set(beats):  # forgotten (expired or `health --forget`): no event
            with redis_errors("forget a component"):
                r.hdel(key, component)
        return made

    def _silent(self, beat: Beat, now: float) -> int:
        log.error("%s has not sent a heartbeat for %.0fs", beat.component, beat.age(now))
        data: ComponentSilentData = {"component": beat.component, "role": beat.role, "host": beat.host,
                                     "pid": beat.pid, "last_beat": beat.ts, "silent_s": beat.age(now),
                                     "last_error": beat.last_error}  # fmt: skip
        return self._append(t.COMPONENT_SILENT, beat, transition_seq(beat.ts, recovered=False), data, now)

    def _recovered(self, beat: Beat, since: float, now: float) -> int:
        log.warning("%s sends heartbeats again", beat.component)
        data: ComponentRecoveredData = {"component": beat.component, "role": beat.role, "host": beat.host,
                                        "pid": beat.pid, "silent_s": max(0.0, beat.ts - since)}  # fmt: skip
        return self._append(t.COMPONENT_RECOVERED, beat, transition_seq(since, recovered=True), data, now)

    def _append(self, event_type: str, beat: Beat, seq: int, data: Any, now: float) -> int:
        event = make_event(event_type, run=t.SYSTEM_RUN, host=self.host, producer=f"watchdog/{beat.component}",
                           seq=seq, data=data, ts=now)  # fmt: skip
        return 1 if self.store.append_one(event) is not None else 0


class Pulse:
    """What a daemon's loop calls each pass: note its lag, write the heartbeat when due, and then
    (for the central daemons) look for silent components."""

    def __init__(self, heartbeat: Heartbeat, *, silence: SilenceWatch | None = None,
                 backlog: Callable[[], int | None] | None = None) -> None:  # fmt: skip
        self.heartbeat = heartbeat
        self.silence = silence
        self.backlog = backlog  # measured only when a beat is due (it may cost a round trip)

    def note(self, lag_s: float) -> None:
        """The loop's lag, written with the next beat (by whichever thread beats)."""
        self.heartbeat.lag_s = round(max(0.0, lag_s), 3)

    def tick(self, *, lag_s: float | None = None, force: bool = False) -> None:
        hb = self.heartbeat
        hb.passing()
        if lag_s is not None:
            hb.lag_s = round(max(0.0, lag_s), 3)
        if not force and time.monotonic() < hb.due:
            return
        if self.backlog is not None:
            hb.backlog = self.backlog()
        if hb.beat(force=True) and self.silence is not None:
            self.silence.check()

    def run_in_thread(self, stop: threading.Event, measure: Callable[[], float | None]) -> threading.Thread:
        """Beat from a thread, for a process whose loop is not ours (the RQ worker); `measure` gives the lag."""

        def loop() -> None:
            while not stop.is_set():
                self.heartbeat.passing()  # its process is alive, also while Redis is away (measure fails)
                try:
                    self.tick(lag_s=measure(), force=True)
                except Exception as exc:  # a beat never kills the process; the next one tries again
                    log.debug("heartbeat thread: %s", exc)
                stop.wait(self.heartbeat.interval_s)

        thread = threading.Thread(target=loop, name=f"heartbeat-{self.heartbeat.role}", daemon=True)
        thread.start()
        return thread


def entry_lag(entries: Sequence[tuple[str, Any]], now: float | None = None) -> float:
    """Pure: how old the oldest of these stream entries was when read (0 for none): a reader's lag."""
    if not entries:
        return 0.0
    sid = entries[0][0]
    sid = sid.decode() if isinstance(sid, bytes) else sid
    return max(0.0, (time.time() if now is None else now) - int(sid.partition("-")[0]) / 1000)

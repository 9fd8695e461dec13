"""Daemon heartbeats: one small Redis hash per component, so a part of trainwarden that went quiet is seen.

Each daemon (agent, dispatcher, worker, notifier) keeps one `Heartbeat` and writes it from its loop
at most every `interval_s` to `tw:beat:<role>@<host>` (HSET + EXPIRE in one round trip). The hash
expires after `RETENTION_S`: a component seen within that window is expected; one whose last beat is
older than `SILENT_INTERVALS` of its own interval is silent. Ages are read from the hash's TTL,
which each beat renews: Redis' clock, so hosts whose clocks disagree are not taken for silent.
No stream event per beat: the event log stays lean (the agent's per-run `agent.heartbeat` events are separate and kept).

What is stored: role, host, pid, version, the interval, the loop's lag (`lag_s`, what it measures in
`lag_of`), a backlog count, the last error logged (text, masked, and time), a notice (what the
daemon waits on now), and `stopped_at` when the daemon was stopped on purpose (SIGTERM, Ctrl-C): a
stopped component is not silent, so a planned restart raises no alarm. `encode`/`decode` are pure;
`Heartbeat.beat` is the one write.

A heartbeat must mean alive, not "its loop is not waiting": `Liveness` lets a daemon beat from a
thread of its own while its loop waits out a declared wait (Slack's Retry-After, a slow call), and
withholds the beat when the loop made no progress and declared nothing (a hung loop goes silent).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis
from trainwarden.core.redact import redact_text
from trainwarden.events.errors import StoreAuthFailed, StoreError
from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors, refusal

log = logging.getLogger(__name__)

INTERVAL_S = 10.0  # default: seconds between two writes of a daemon's heartbeat
SILENT_INTERVALS = 3  # no beat for this many of its intervals: silent
RETENTION_S = 7 * 24 * 3600.0  # a component not seen for this long is forgotten (the hash expires)
ERROR_CHARS = 300
NOTICE_CHARS = 1000


@dataclass(frozen=True, slots=True)
class Beat:
    """One component's last heartbeat as stored."""

    role: str  # agent | dispatcher | worker | notifier
    host: str
    pid: int
    version: str
    interval_s: float
    ts: float  # wall-clock time of the beat
    started: float  # when the process started
    lag_s: float | None = None
    lag_of: str = ""  # what lag_s measures: feed lag, queue wait, spool backlog
    backlog: int | None = None  # feed entries / queued jobs / spooled bytes
    last_error: str | None = None
    last_error_at: float | None = None
    notice: str | None = None  # what the daemon wants an operator to know now (the agent: runs it reads blind)
    stopped_at: float | None = None  # when the daemon was stopped on purpose (not silent: nobody needs waking)
    redis_age: float | None = None  # age by Redis' clock when read (from the hash's TTL): immune to clock skew

    @property
    def component(self) -> str:
        return component_name(self.role, self.host)

    def age(self, now: float) -> float:
        if self.redis_age is not None:
            return self.redis_age
        return max(0.0, now - self.ts)

    def silent(self, now: float) -> bool:
        return self.stopped_at is None and self.age(now) > SILENT_INTERVALS * self.interval_s


def component_name(role: str, host: str) -> str:
    return f"{role}@{host}"


_TEXT = ("role", "host", "version", "lag_of", "last_error", "notice")
_FLOATS = ("interval_s", "ts", "started", "lag_s", "last_error_at", "stopped_at")


def encode(beat: Beat) -> dict[str, str]:
    """Pure: the hash fields (an absent value is an empty string, so every write replaces all fields)."""
    out: dict[str, str] = {"pid": str(beat.pid)}
    for name in (*_TEXT, *_FLOATS, "backlog"):
        value = getattr(beat, name)
        out[name] = "" if value is None else repr(value) if isinstance(value, float) else str(value)
    return out


def decode(fields: Mapping[bytes, bytes] | Mapping[str, str]) -> Beat | None:
    """Pure: a Beat from the hash, or None when it is not one (half-written, foreign)."""
    f = {(k.decode() if isinstance(k, bytes) else k): (v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
         for k, v in fields.items() if v not in (b"", "")}  # fmt: skip
    try:
        values: dict[str, Any] = {name: float(f[name]) for name in _FLOATS if name in f}
        values.update({name: f[name] for name in _TEXT if name in f})
        values["pid"] = int(f["pid"])
        if "backlog" in f:
            values["backlog"] = int(f["backlog"])
        return Beat(**values)
    except (KeyError, ValueError, TypeError):
        return None


def read_beats(client: redis.Redis, keys: Keys, *, host: str | None = None) -> list[Beat]:
    """Every known component's last beat (those whose hash expired are dropped from the index), or only
    `host`'s: read without touching another host's hash, which a GPU server's ACL user may not read."""
    with redis_errors("read the heartbeats"):
        names = sorted(m.decode() if isinstance(m, bytes) else str(m) for m in client.smembers(keys.beats()))
        names = [n for n in names if host is None or n.partition("@")[2] == host]  # role@host; roles hold no @
        if not names:
            return []
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(keys.beat(name))
            pipe.pttl(keys.beat(name))
        replies = pipe.execute()
    beats, gone = [], []
    for name, fields, ttl_ms in zip(names, replies[::2], replies[1::2], strict=True):
        beat = decode(fields) if fields else None
        if beat is None:
            gone.append(name)
            continue
        beats.append(_aged(beat, ttl_ms))
    if gone and host is None:  # the index is tidied by a full read (an agent's user may not write it)
        with redis_errors("read the heartbeats"):
            client.srem(keys.beats(), *gone)
    return sorted(beats, key=lambda b: b.component)


def read_beat(client: Any, keys: Keys, component: str) -> Beat | None:
    """One component's last beat (its age by Redis' clock), or None when it never beat or was forgotten."""
    with redis_errors("read a heartbeat"):
        pipe = client.pipeline(transaction=False)
        pipe.hgetall(keys.beat(component))
        pipe.pttl(keys.beat(component))
        fields, ttl_ms = pipe.execute()
    beat = decode(fields) if fields else None
    return None if beat is None else _aged(beat, ttl_ms)


def _aged(beat: Beat, ttl_ms: object) -> Beat:
    """Each beat renews the TTL: RETENTION_S - TTL is the beat's age by Redis' clock."""
    age = RETENTION_S - ttl_ms / 1000 if isinstance(ttl_ms, int) and ttl_ms > 0 else None
    return dataclasses.replace(beat, redis_age=None if age is None else max(0.0, age))


def write_refusal(client: Any, keys: Keys) -> str | None:
    """Whether Redis takes writes now, by writing one small expiring key: None, or why not in words for an
    operator ("Redis refuses writes: out of memory (maxmemory 5 MB)"). Heartbeats are writes too: while Redis
    refuses them every daemon looks silent, and this says why."""
    with redis_errors("read the heartbeats"):
        try:
            client.set(keys.probe(), repr(time.time()), px=60_000)
        except redis.ResponseError as exc:
            if (words := refusal(exc)) is None:
                raise
            detail = ""
            if isinstance(exc, redis.exceptions.OutOfMemoryError):
                limit = int(client.info("memory").get("maxmemory", 0))
                detail = f" (maxmemory {megabytes(limit)})" if limit else ""
            return f"Redis refuses writes: {words}{detail}"
    return None


def megabytes(n: int) -> str:
    """Pure: a byte count as an operator reads it (`5 MB`, `0.5 MB`)."""
    return f"{n / 2**20:.3g} MB"


def forget(client: redis.Redis, keys: Keys, component: str) -> bool:
    """Drop a component that is gone for good (a retired host), so it is no longer expected."""
    with redis_errors("forget a component"):
        client.srem(keys.beats(), component)
        return bool(client.delete(keys.beat(component)))


@dataclass(slots=True)
class Heartbeat:
    """This process's heartbeat: its loop sets lag and backlog, the log handler the last error."""

    client: Any  # redis.Redis or RedisCluster
    keys: Keys
    role: str
    host: str
    version: str
    interval_s: float = INTERVAL_S
    clock: Callable[[], float] = time.time
    lag_s: float | None = None
    lag_of: str = ""
    backlog: int | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    notice: str | None = None
    started: float = field(default_factory=time.time)
    stopped_at: float | None = None  # set by `stopped()`: no beat is written after it
    _next: float = 0.0
    last_written: float | None = None
    passed: float = field(default_factory=time.monotonic)  # the loop's last pass (monotonic), Redis up or not

    def passing(self) -> None:
        """The loop made a pass (a step, or a wait out of a Redis outage): it is alive (`/healthz`)."""
        self.passed = time.monotonic()

    def stale_s(self) -> float | None:
        """Seconds since the loop's last pass, when over `SILENT_INTERVALS` intervals (a hung loop); else None."""
        age = time.monotonic() - self.passed
        return age if age > SILENT_INTERVALS * self.interval_s else None

    @property
    def component(self) -> str:
        return component_name(self.role, self.host)

    @property
    def due(self) -> float:
        """Monotonic time the next beat is due."""
        return self._next

    def snapshot(self) -> Beat:
        return Beat(role=self.role, host=self.host, pid=os.getpid(), version=self.version, interval_s=self.interval_s,
                    ts=self.clock(), started=self.started, lag_s=self.lag_s, lag_of=self.lag_of, backlog=self.backlog,
                    last_error=self.last_error, last_error_at=self.last_error_at, stopped_at=self.stopped_at,
                    notice=redact_text(self.notice)[:NOTICE_CHARS] if self.notice else None)  # fmt: skip

    def error(self, text: str) -> None:
        self.last_error = redact_text(text)[:ERROR_CHARS]
        self.last_error_at = self.clock()
        self._next = 0.0  # due now: `health` shows the newest error, not one an interval old

    def beat(self, *, force: bool = False) -> bool:
        """Write the beat if one is due (or `force`); a Redis failure is left to the loop's own handling
        of outages (it is logged here at debug level and the beat is tried again next time)."""
        now = time.monotonic()
        if self.stopped_at is not None or (not force and now < self._next):
            return False
        self._next = now + self.interval_s
        return self._write(self.snapshot())

    def stopped(self) -> None:
        """Record that the daemon was stopped on purpose (its last beat), so nobody takes it for silent."""
        if self.stopped_at is None:
            self.notice = "stopped by the operator"
            self.stopped_at = self.clock()
            self._write(self.snapshot())

    def _write(self, beat: Beat) -> bool:
        key = self.keys.beat(self.component)
        try:
            with redis_errors("write a heartbeat"):
                pipe = self.client.pipeline(transaction=False)
                pipe.hset(key, mapping=encode(beat))
                pipe.sadd(self.keys.beats(), self.component)
                pipe.pexpire(key, int(RETENTION_S * 1000))
                pipe.execute()
        except StoreAuthFailed:
            raise
        except (StoreError, redis.RedisError) as exc:
            log.debug("heartbeat of %s not written: %s", self.component, exc)
            return False
        self.last_written = beat.ts
        return True


class Liveness:
    """Whether a daemon's loop is alive, for a heartbeat written from another thread: the loop made
    progress within `stale_s`, or it is in a wait it declared that has not overrun. The declared wait
    is also the daemon's state, shown as its heartbeat's notice ("waiting out Slack's Retry-After 30 s")."""

    def __init__(self, stale_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.stale_s = stale_s
        self.clock = clock
        self._progress = clock()
        self._wait: tuple[str, float] | None = None  # what, until (monotonic)

    def progress(self) -> None:
        self._progress = self.clock()

    @contextlib.contextmanager
    def waiting(self, what: str, seconds: float) -> Iterator[None]:
        """Declare a wait of up to `seconds` (the loop is alive meanwhile), then count as progress."""
        outer = self._wait
        self._wait = (what, self.clock() + seconds)
        try:
            yield
        finally:
            self._wait = outer
            self.progress()

    def alive(self) -> bool:
        now = self.clock()
        wait = self._wait
        return now - self._progress <= self.stale_s or (wait is not None and now <= wait[1] + self.stale_s)

    @property
    def notice(self) -> str | None:
        wait = self._wait
        return wait[0] if wait is not None else None


# `extra=` of a warning that reports good news (Redis back) or a normal state (the notifier lease held, a
# standby waiting): not a last error, so `trainwarden health` shows no error for a daemon that has none
NOT_AN_ERROR = {"not_an_error": True}


class LastErrorHandler(logging.Handler):
    """Logging handler that keeps the last WARNING-or-worse message in the heartbeat (masked), and has it
    written at the next pass of the loop rather than a heartbeat interval later; news of a recovery
    (`extra=NOT_AN_ERROR`) leaves the error it recovered from in place."""

    def __init__(self, heartbeat: Heartbeat) -> None:
        super().__init__(level=logging.WARNING)
        self.heartbeat = heartbeat

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "not_an_error", False):
            return
        try:
            self.heartbeat.error(record.getMessage())
        except Exception:  # a log handler must never raise
            self.handleError(record)


def last_words(error: str | None = None) -> None:
    """A daemon about to exit: write its heartbeat now, its last error being `error` (what ends it) when
    given, so that `trainwarden health` and the SILENT post name that, not an older warning. Best effort."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, LastErrorHandler):
            if error:
                handler.heartbeat.error(error)
            try:
                handler.heartbeat.beat(force=True)
            except Exception as exc:  # Redis refused even that: the log has the error
                log.debug("last heartbeat of %s not written: %s", handler.heartbeat.component, exc)

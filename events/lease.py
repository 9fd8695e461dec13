"""One holder at a time: a lease in Redis with a fencing token (the notifier's; bot/notifier.py).

Two notifiers posting from one feed post twice, so only the lease holder notifies; another one
stands by and takes over when the lease lapses. The lease (`tw:{notifier}:lease`, `TOKEN HOLDER`,
with a TTL the holder renews) names the holder; the fence (`tw:{notifier}:fence`) is a counter
raised by every takeover, so it changes only when the holder does. A holder that was paused past
its lease (a stopped process, a long GC) learns it lost when it writes: every write only the holder
may make runs in `transaction`, which WATCHes the fence and refuses when it no longer carries this
holder's token (`LeaseLost`); and `check` is asked right before each post to Slack. The holder is
`host:pid:nonce`: a holder on this host whose process is gone (kill -9) is taken over at once, one
on another host when its lease expires. Both keys share one hash slot, so the scripts run on a
Redis Cluster too; there the fence check before a transaction on a run's keys cannot be atomic
with it (another slot) and is a read just before it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from redis.client import Pipeline
from redis.cluster import RedisCluster
from trainwarden.events.errors import LeaseLost
from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors

log = logging.getLogger(__name__)

# KEYS: lease, fence.  ARGV: holder, ttl ms, a holder found dead ('' for none).
# Returns {token, holder, 1} when `holder` holds the lease now, {token, holder, 0, pttl} when another does.
ACQUIRE_LUA = """
local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, ' ', 1, true)
  local tok, who = tonumber(string.sub(cur, 1, sep - 1)), string.sub(cur, sep + 1)
  if who == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {tok, who, 1, 0}
  end
  if who ~= ARGV[3] then return {tok, who, 0, redis.call('PTTL', KEYS[1])} end
end
local tok = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], tok .. ' ' .. ARGV[1], 'PX', ARGV[2])
return {tok, ARGV[1], 1, 0}
"""
# KEYS: lease.  ARGV: 'TOKEN HOLDER', ttl ms ('' to release). 1 when it was ours.
RENEW_LUA = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
"""


def process_alive(pid: int) -> bool:
    """Whether a process of this host has that pid (one that is someone else's counts: it exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def holder_dead(holder: str, *, host: str) -> bool:
    """Pure but for the pid probe: a holder `host:pid:nonce` on this host whose process no longer exists."""
    parts = holder.split(":")
    return len(parts) == 3 and parts[0] == host and parts[1].isdigit() and not process_alive(int(parts[1]))


@dataclass(frozen=True, slots=True)
class Holding:
    """Who holds the lease: its fencing token, its holder id, and how long its lease still runs."""

    token: int
    holder: str
    mine: bool
    ttl_s: float = 0.0


class LeaseBase(ABC):
    """The lease of one role (`name`), as this process sees it, whatever stores it.

    A backend supplies three atomic steps on the stored lease (`_take`, `_extend`, `_fence`); the
    holder's side -- its token, how long it may trust the lease, a takeover from a dead process of
    this host, LeaseLost -- is the same for every backend."""

    def __init__(self, name: str, *, ttl_s: float, host: str | None, clock: Callable[[], float]) -> None:
        self.name = name
        self.ttl_s = ttl_s
        self.host = host or socket.gethostname()
        self.holder = f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.clock = clock
        self.token: int | None = None  # the fencing token while this process holds the lease
        self.valid_until = 0.0  # monotonic: the lease runs at least until then (renewed before)

    @property
    def held(self) -> bool:
        return self.token is not None and self.clock() < self.valid_until

    def acquire(self) -> Holding:
        """Take the lease if it is free, lapsed, ours, or held by a dead process of this host."""
        started = self.clock()
        current = self._take("")
        if not current.mine and holder_dead(current.holder, host=self.host):
            log.warning("the %s lease holder %s is gone (its process ended); taking over", self.name,
                        current.holder)  # fmt: skip
            current = self._take(current.holder)
        if current.mine:
            self.token, self.valid_until = current.token, started + self.ttl_s
        return current

    def renew(self) -> bool:
        """Extend the lease; False (and no longer held) when it lapsed and another took it."""
        if self.token is None:
            return False
        started = self.clock()
        if self._extend(self.token, self.ttl_s):
            self.valid_until = started + self.ttl_s
            return True
        self.token = None
        return False

    def release(self) -> None:
        """Give the lease up (a clean stop), so a standby takes over at once."""
        if self.token is None:
            return
        token, self.token = self.token, None
        self._extend(token, None)

    def check(self) -> None:
        """Raise LeaseLost unless this process still holds the lease (its token is the fence's)."""
        if self.token is None or self.clock() >= self.valid_until:
            raise self._lost("its lease lapsed")
        fence = self._fence()
        if fence is None or fence != self.token:
            self.token = None
            raise self._lost(f"another took over with token {fence or 0}")

    def _lost(self, why: str) -> LeaseLost:
        return LeaseLost(f"this {self.name} no longer holds the {self.name} lease ({why}); it stands by")

    @abstractmethod
    def _take(self, dead: str) -> Holding:
        """Atomically: take or extend the lease for this holder if free, lapsed, ours or `dead`'s; else who holds it."""

    @abstractmethod
    def _extend(self, token: int, ttl_s: float | None) -> bool:
        """Atomically: extend (`ttl_s` None: release) the lease if `token` and this holder still hold it."""

    @abstractmethod
    def _fence(self) -> int | None:
        """The fencing token of the last takeover (None before the first)."""


class Lease(LeaseBase):
    """The lease of one role in Redis (one server or a cluster), with writes fenced by `transaction`."""

    def __init__(self, client: Any, keys: Keys, name: str, *, ttl_s: float, host: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        super().__init__(name, ttl_s=ttl_s, host=host, clock=clock)
        self.client = client
        self.key = f"{keys.namespace}:{{{name}}}:lease"
        self.fence_key = f"{keys.namespace}:{{{name}}}:fence"
        self.cluster = isinstance(client, RedisCluster)

    def _take(self, dead: str) -> Holding:
        with redis_errors(f"take the {self.name} lease"):
            return self._call(ACQUIRE_LUA, 2, self.key, self.fence_key, self.holder, self._ttl_ms(), dead)

    def _extend(self, token: int, ttl_s: float | None) -> bool:
        what = "renew" if ttl_s is not None else "release"
        with redis_errors(f"{what} the {self.name} lease"):
            ttl = "" if ttl_s is None else self._ttl_ms()
            return bool(self.client.eval(RENEW_LUA, 1, self.key, f"{token} {self.holder}", ttl))

    def _fence(self) -> int | None:
        with redis_errors(f"check the {self.name} lease"):
            fence = self.client.get(self.fence_key)
        return None if fence is None else int(fence)

    def transaction(self, fill: Callable[[Pipeline], None], *, what: str) -> None:
        """Run the writes `fill` queues in one MULTI/EXEC, only while this process holds the lease."""
        pipe = self.client.pipeline(transaction=True)
        try:
            with redis_errors(what):
                if self.cluster:
                    self.check()
                else:
                    pipe.watch(self.fence_key)
                    fence = pipe.get(self.fence_key)
                    if self.token is None or fence is None or int(fence) != self.token:
                        self.token = None
                        raise self._lost("another took over")
                    pipe.multi()
                fill(pipe)
                pipe.execute()
        except redis.WatchError:
            self.token = None
            raise self._lost("another took over while it wrote") from None
        finally:
            pipe.reset()

    def _ttl_ms(self) -> int:
        return max(1, round(self.ttl_s * 1000))

    def _call(self, script: str, numkeys: int, *args: object) -> Holding:
        tok, who, mine, pttl = self.client.eval(script, numkeys, *args)
        holder = who.decode() if isinstance(who, bytes) else str(who)
        return Holding(token=int(tok), holder=holder, mine=bool(mine), ttl_s=max(0, int(pttl)) / 1000)


class Unfenced:
    """The same interface without a lease (one notifier built in a test or a one-shot tool)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def check(self) -> None:
        return None

    def transaction(self, fill: Callable[[Pipeline], None], *, what: str) -> None:
        pipe = self.client.pipeline(transaction=True)
        with redis_errors(what):
            fill(pipe)
            pipe.execute()

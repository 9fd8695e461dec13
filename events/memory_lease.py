"""Leases in process memory, with the semantics of events/lease.py's scripts (the in-memory backend's).

A table holds, per role, `TOKEN HOLDER` with an expiry and a fence counter raised by every
takeover. `MemoryLease` supplies LeaseBase's three atomic steps from it, as `Lease` does with its
scripts on Redis; the holder's side (tokens, takeover from a dead process, LeaseLost) is LeaseBase's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from trainwarden.events.lease import Holding, LeaseBase


@dataclass(frozen=True, slots=True)
class Held:
    token: int
    holder: str
    expires: float  # by the table's clock


class LeaseTable:
    """Every role's lease and fence; each method is atomic, as each Lua script is on Redis."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.held: dict[str, Held] = {}
        self.fences: dict[str, int] = {}

    def _current(self, name: str) -> Held | None:
        held = self.held.get(name)
        if held is not None and self.clock() >= held.expires:
            del self.held[name]  # expired, as a key past its PX is gone
            return None
        return held

    def acquire(self, name: str, holder: str, ttl_s: float, dead: str = "") -> Holding:
        """Take or extend `name` for `holder` if free, lapsed, its own, or held by `dead`; else say who holds it."""
        with self.lock:
            now, cur = self.clock(), self._current(name)
            if cur is not None and cur.holder == holder:
                self.held[name] = Held(cur.token, holder, now + ttl_s)
                return Holding(token=cur.token, holder=holder, mine=True)
            if cur is not None and cur.holder != dead:
                return Holding(token=cur.token, holder=cur.holder, mine=False, ttl_s=max(0.0, cur.expires - now))
            token = self.fences[name] = self.fences.get(name, 0) + 1
            self.held[name] = Held(token, holder, now + ttl_s)
            return Holding(token=token, holder=holder, mine=True)

    def renew(self, name: str, token: int, holder: str, ttl_s: float | None) -> bool:
        """Extend (or with `ttl_s` None, release) the lease if `token` and `holder` still hold it."""
        with self.lock:
            cur = self._current(name)
            if cur is None or (cur.token, cur.holder) != (token, holder):
                return False
            if ttl_s is None:
                del self.held[name]
            else:
                self.held[name] = Held(token, holder, self.clock() + ttl_s)
            return True

    def fence(self, name: str) -> int | None:
        with self.lock:
            return self.fences.get(name)


class MemoryLease(LeaseBase):
    """The lease of one role (`name`) in a LeaseTable, as this process sees it."""

    def __init__(self, table: LeaseTable, name: str, *, ttl_s: float, host: str | None = None) -> None:
        super().__init__(name, ttl_s=ttl_s, host=host, clock=table.clock)
        self.table = table

    def _take(self, dead: str) -> Holding:
        return self.table.acquire(self.name, self.holder, self.ttl_s, dead)

    def _extend(self, token: int, ttl_s: float | None) -> bool:
        return self.table.renew(self.name, token, self.holder, ttl_s)

    def _fence(self) -> int | None:
        return self.table.fence(self.name)

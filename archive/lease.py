"""One archive of a run at a time: a lease in Redis (`tw:{run}:archiving`), taken over from a dead holder.

Two archives of one run at once could each take the other's fresh file for the leftover of a
crash and delete it. The lease prevents that, and the trim itself checks it (the commit script
refuses unless this lease still holds), so an archive stalled past its lease trims nothing. The
holder is `host:pid:token`: a holder on this host whose process is gone (kill -9) is taken over at
once; one on another host only when its lease expires.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field

from trainwarden.archive.errors import ArchiveBusy
from trainwarden.events.lease import holder_dead
from trainwarden.events.redis_types import Client, bytes_value
from trainwarden.events.store import redis_errors

LEASE_MS = 60_000

# KEYS: lease.  ARGV: expected holder, new holder ('' to delete), ttl ms. Compare-and-set.
CAS_LUA = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1
"""


@dataclass(slots=True)
class ArchiveLease:
    client: Client
    key: str
    run: str
    ttl_ms: int = LEASE_MS
    host: str = field(default_factory=socket.gethostname)
    owner: str = ""

    def __post_init__(self) -> None:
        self.owner = f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def acquire(self) -> None:
        with redis_errors("take the archive lease", run=self.run):
            if self.client.set(self.key, self.owner, nx=True, px=self.ttl_ms):
                return
            raw = bytes_value(self.client.get(self.key))
            holder = raw.decode() if raw else ""
            if holder and holder_dead(holder, host=self.host) and self._cas(holder, self.owner):
                return  # its process died (kill -9): nothing of it can still trim
            if not holder and self.client.set(self.key, self.owner, nx=True, px=self.ttl_ms):
                return
        raise ArchiveBusy(f"another archive of {self.run!r} is in progress ({holder or 'just started'}); run this "
                          f"one again when it is done (a lease on another host expires {self.ttl_ms // 1000}s after "
                          "its holder stops)", run=self.run)  # fmt: skip

    def refresh(self) -> None:
        with redis_errors("renew the archive lease", run=self.run):
            if self._cas(self.owner, self.owner):
                return
        raise ArchiveBusy(f"the archive lease of {self.run!r} expired and was taken over; nothing was trimmed",
                          run=self.run)  # fmt: skip

    def release(self) -> None:
        with redis_errors("release the archive lease", run=self.run):
            self._cas(self.owner, "")

    def _cas(self, expected: str, new: str) -> bool:
        return bool(self.client.eval(CAS_LUA, 1, self.key, expected, new, self.ttl_ms))

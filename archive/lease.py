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
from trainwarden.events.archive_state import lease_holder, lease_swap, lease_take
from trainwarden.events.lease import holder_dead
from trainwarden.events.redis_types import Client

LEASE_MS = 60_000


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
        if lease_take(self.client, self.key, self.owner, ttl_ms=self.ttl_ms, run=self.run):
            return
        holder = lease_holder(self.client, self.key, run=self.run)
        if holder and holder_dead(holder, host=self.host) and self._cas(holder, self.owner, "take the archive lease"):
            return  # its process died (kill -9): nothing of it can still trim
        if not holder and lease_take(self.client, self.key, self.owner, ttl_ms=self.ttl_ms, run=self.run):
            return
        raise ArchiveBusy(f"another archive of {self.run!r} is in progress ({holder or 'just started'}); run this "
                          f"one again when it is done (a lease on another host expires {self.ttl_ms // 1000}s after "
                          "its holder stops)", run=self.run)  # fmt: skip

    def refresh(self) -> None:
        if self._cas(self.owner, self.owner, "renew the archive lease"):
            return
        raise ArchiveBusy(f"the archive lease of {self.run!r} expired and was taken over; nothing was trimmed",
                          run=self.run)  # fmt: skip

    def release(self) -> None:
        self._cas(self.owner, "", "release the archive lease")

    def _cas(self, expected: str, new: str, what: str) -> bool:
        return lease_swap(self.client, self.key, expected, new, ttl_ms=self.ttl_ms, what=what, run=self.run)

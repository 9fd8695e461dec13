"""What jobs need from their process: set once by `trainwarden worker` (or a test), read by jobs.

RQ jobs are referenced by import path and receive only plain arguments, so their dependencies
(Redis client, policy, run controller, paths) live here. The forking worker's work horses
inherit it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainwarden.events.feed import DISPATCH_GROUP
from trainwarden.events.redis_types import Client
from trainwarden.events.store import EventStore
from trainwarden.remote.launch import RemoteLauncher
from trainwarden.remote.stop import RunController
from trainwarden.workers.config import EVIDENCE_TIMEOUT_S, LOCK_TIMEOUT_S, BreakerSettings
from trainwarden.workers.errors import NoWorkerContext
from trainwarden.workers.policy_source import PolicySource
from trainwarden.workers.schedule import TickSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerContext:
    store: EventStore
    host: str
    policies: PolicySource
    controller: RunController
    evidence_dir: Path
    findings_file: Path | None = None  # where STOP notes are appended (None: nowhere)
    ticks: TickSettings = field(default_factory=TickSettings)
    clock: Callable[[], float] = time.time  # wall clock for output timestamps and tick scheduling only
    lock_timeout_s: float = LOCK_TIMEOUT_S
    evidence_timeout_s: float = EVIDENCE_TIMEOUT_S
    feed_group: str = DISPATCH_GROUP
    breaker: BreakerSettings = field(default_factory=BreakerSettings)  # policy STOPs held past a burst
    launcher: RemoteLauncher | None = None  # set when servers.yaml is configured (resumes, /launch)

    @property
    def redis(self) -> Client:
        return self.store.redis


class _Slot:
    context: WorkerContext | None = None


def install(context: WorkerContext | None) -> None:
    _Slot.context = context


def current() -> WorkerContext:
    if _Slot.context is None:
        raise NoWorkerContext(
            "this process has no worker context: run jobs with `trainwarden worker` (or call "
            "trainwarden.workers.context.install() first in tests)"
        )
    return _Slot.context

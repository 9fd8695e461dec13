"""`up --redis` keeps the redis-server it started, as it keeps its daemons in view.

Without it a redis-server killed under `up` (kill -9, the OOM killer) left every daemon retrying
forever: `up` neither restarted Redis nor exited, so no supervisor above it (`Restart=on-failure`)
saw a fault, no NaN was stopped and no alert could be posted. Here `up` restarts it on the same port
and data directory (the AOF brings back what was written, up to the last second's fsync), with
backoff, and says so; the daemons reconnect on their own (events/loop.py). A redis-server that cannot
be started again, or that dies again each time soon after it started (a crash loop), is given up on
after MAX_ATTEMPTS: `up` then stops the daemons and exits 1, naming why, so that the supervisor above
it takes over. (A daemon that exits is not restarted, unlike Redis: trainwarden/up.py says why.)
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from trainwarden.core.errors import RedisServerError
from trainwarden.tools.redis_server import RedisServer

FIRST_BACKOFF_S = 0.5  # after a restart that failed, or a redis-server that died again soon after one
MAX_BACKOFF_S = 8.0
MAX_ATTEMPTS = 5  # restarts in a row that failed or did not last: then `up` exits 1
STABLE_S = 30.0  # a redis-server that ran this long after its restart starts the count afresh when it dies


def backoff_s(failures: int) -> float:
    """Pure: the wait before the next restart after `failures` in a row (none: at once)."""
    return 0.0 if failures <= 0 else min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (failures - 1))


def exit_words(returncode: int) -> str:
    """Pure: how a process ended, as `up` says it ("killed by signal 9 (SIGKILL)", "exit status 1")."""
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        return f"killed by signal {-returncode}"
    return f"killed by signal {-returncode} ({name})"


def last_line(text: str) -> str:
    """Pure: the last line with words of `text` (a failed start's message ends with redis-server's log: its
    last line says why, e.g. "Failed listening on port 6379 (TCP), aborting.")."""
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), text)


@dataclass(slots=True)
class RedisKeeper:
    """Watch `server` from `up`'s loop (`check`, every poll); restart it when it exits."""

    server: RedisServer
    say: Callable[[str], None]
    clock: Callable[[], float] = time.monotonic
    failures: int = 0  # restarts in a row that failed or did not last STABLE_S
    started: float = field(default_factory=time.monotonic)  # when the running redis-server was (re)started
    next_try: float | None = None  # set while it is down: when to try to start it again
    given_up: str | None = None

    def check(self) -> str | None:
        """None while Redis runs or is being brought back; once given up on, why (`up` then exits 1)."""
        if self.given_up is not None:
            return self.given_up
        now = self.clock()
        if self.next_try is None:
            proc = self.server.process
            if proc is None or proc.poll() is None:
                return None
            if now - self.started >= STABLE_S:
                self.failures = 0  # else it died soon after a restart, which counts as failed
            how = exit_words(proc.returncode)
            if self.failures >= MAX_ATTEMPTS:
                return self._give_up(f"it exited ({how}) within {STABLE_S:.0f}s of each restart")
            self.next_try = now + backoff_s(self.failures)
            self.say(f"redis-server exited ({how}); restarting it on port {self.server.port} with its data in "
                     f"{self.server.directory} (attempt {self.failures + 1})")  # fmt: skip
        if now < self.next_try:
            return None
        return self._restart()

    def _restart(self) -> str | None:
        try:
            self.server.start()  # the same port, directory and AOF
        except RedisServerError as exc:
            self.failures += 1
            if self.failures >= MAX_ATTEMPTS:
                return self._give_up(last_line(str(exc)))
            wait = backoff_s(self.failures)
            self.next_try = self.clock() + wait
            self.say(f"redis-server did not start again ({last_line(str(exc))}); attempt {self.failures + 1} "
                     f"in {wait:g}s")  # fmt: skip
            return None
        self.next_try = None
        self.started = self.clock()
        self.failures += 1  # until it has run STABLE_S: a crash loop is not a recovery
        pid = self.server.process.pid if self.server.process is not None else None
        self.say(f"redis-server restarted on port {self.server.port} (pid {pid}); the daemons reconnect on their own")
        return None

    def _give_up(self, why: str) -> str:
        self.given_up = (f"redis-server could not be kept running after {MAX_ATTEMPTS} attempts ({why}); "
                         f"its log: {self.server.directory / 'redis.log'}")  # fmt: skip
        return self.given_up

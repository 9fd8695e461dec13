"""A run's secrets, learned from its processes' environments, so the agent masks them before publishing.

The agent itself holds no secret of a run (the systemd unit keeps them out of its environment),
yet a trainer may print its W&B key or a token in a log line or a traceback. The values of the
secret variables in `/proc/<pid>/environ` of the run's processes (names like *_TOKEN, *_API_KEY,
*PASSWORD*, or values shaped like a token; see events.redact) are kept for the run's life, even
after its processes are gone, and masked wherever its text goes out: `log.line`, `run.failed`.

They are read when the agent starts watching the run, at each process sample (new processes),
and, during the run's first `LOOK_FOR_S` (when trainers log in and print their keys), whenever
text is about to go out (looking for new processes at most once per `LOOK_EVERY_S`: a look lists
/proc), so that a line printed by a process started since the last sample is masked too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from trainwarden.agent import procfs
from trainwarden.agent.health import tmux_pane_pid
from trainwarden.agent.watch import RunWatch
from trainwarden.core.redact import env_secrets, known_secrets

LOOK_EVERY_S = 1.0
LOOK_FOR_S = 60.0


class RunSecrets:
    def __init__(self, watch: RunWatch) -> None:
        self.watch = watch
        self.values: list[str] = known_secrets()  # the agent's own, then the run's: longest first
        self._read: set[int] = set()  # pids whose environment was read
        self._looked_at: float | None = None
        self._since = time.monotonic()

    def learn(self, pids: Iterable[int]) -> None:
        """Read the environment of processes not read yet."""
        found: set[str] = set()
        for pid in pids:
            if pid in self._read:
                continue
            self._read.add(pid)
            env = procfs.read_environ(pid)
            if env:
                found.update(env_secrets(env))
        if not found <= set(self.values):
            self.values = sorted({*self.values, *found}, key=len, reverse=True)

    def __call__(self) -> list[str]:
        """The values to mask now, after looking for new processes of the run."""
        if (self.watch.pid or self.watch.session) and time.monotonic() - self._since < LOOK_FOR_S:
            self._look()
        return self.values

    def _look(self) -> None:
        now = time.monotonic()
        if self._looked_at is not None and now - self._looked_at < LOOK_EVERY_S:
            return
        self._looked_at = now
        root = self.watch.pid
        if root is None and self.watch.session:
            root = tmux_pane_pid(self.watch.session, self.watch.tmux_socket)
        if root is not None:
            self.learn(procfs.descendants(root, procfs.snapshot()))

"""Which source a run's `metric` events come from: W&B first, the log as fallback (pure).

States (the training-check method's data sources), announced by `source.status` on change:

- `sidecar`: the training process writes its metrics to the run's sidecar file (agent.sidecar):
  exact names and steps, so they win over both W&B and the log. The log's metric lines and W&B
  rows are dropped (held lines too: the sidecar is read from its first line); notable log lines
  still go out. Once active it stays the source for as long as the run is watched.
- `wandb_ok`: W&B history rows are the run's metrics. The log's metric lines are held back, and
  dropped once a W&B row at least as recent covers them (`_timestamp` vs the time the line was
  read). Notable log lines (tracebacks, OOM) always go out at once.
- `log_fallback`: the run uses W&B (agent.wandb_use) but there is no usable W&B (none found,
  unreadable, API down, or W&B silent for `stale_s` while the log kept printing metrics). The held
  lines are sent first, in order, so the switch loses nothing; then log lines go out as they come.
- `log`: the run does not use W&B; its log is its metrics source. Nothing is announced while that
  cannot be told yet (before its processes' environment is read): the log's lines go out meanwhile.
- `unreachable`: neither W&B nor the log can be read. Policies WAIT on it.

When W&B comes back (log_fallback -> wandb_ok), W&B rows not newer than the last metric the log
sent are skipped, so the switch doubles nothing. At start, `unreachable` is only announced after
`startup_grace_s` (a launched run's log and W&B directory take a moment to appear).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from trainwarden.agent.config import WANDB_STALE_S
from trainwarden.agent.logsource import Item
from trainwarden.agent.wandb_source import Reading, Row

SIDECAR = "sidecar"
WANDB_OK = "wandb_ok"
LOG_FALLBACK = "log_fallback"
LOG = "log"
UNREACHABLE = "unreachable"
STALE_S = WANDB_STALE_S
MAX_HELD = 5000
STARTUP_GRACE_S = 30.0
SIDECAR_REASON = "the training process writes its metrics to its sidecar file (trainwarden.log)"
COVER_SLACK_S = 1.0  # a W&B row logged this close after a line was read covers it


@dataclass(frozen=True, slots=True)
class Transition:
    status: str
    previous: str | None
    reason: str
    url: str | None


@dataclass(slots=True)
class Decision:
    items: list[Item]  # log items to send now, in order
    rows: list[Row]  # W&B rows to send now, in order
    transition: Transition | None


class Arbiter:
    def __init__(self, *, started: float, stale_s: float = STALE_S, max_held: int = MAX_HELD,
                 startup_grace_s: float = STARTUP_GRACE_S) -> None:  # fmt: skip
        self.started = started
        self.stale_s = stale_s
        self.startup_grace_s = startup_grace_s
        self.status: str | None = None
        self.reason = ""
        self.held: deque[tuple[float, Item]] = deque(maxlen=max_held)
        self.dropped = 0  # held lines pushed out by the bound (W&B stayed behind for very long)
        self.last_log_at: float | None = None  # read time of the newest metric the log sent
        self.stale = False

    @property
    def held_first(self) -> Item | None:
        """The oldest held line: the agent must not save a log offset past it."""
        return self.held[0][1] if self.held else None

    def step(self, *, now: float, items: list[Item], wandb: Reading, log_available: bool,
             sidecar: bool = False, uses_wandb: bool | None = True) -> Decision:  # fmt: skip
        """`uses_wandb`: whether the run uses W&B (agent.wandb_use); None while that is not known."""
        new_rows = [r for r in wandb.rows if self.last_log_at is None or r.ts is None or r.ts > self.last_log_at]
        if self.stale and new_rows:
            self.stale = False  # W&B is writing again
        if self.status == WANDB_OK and not wandb.finished and self.held and now - self.held[0][0] > self.stale_s:
            self.stale = True
        want, reason = (SIDECAR, SIDECAR_REASON) if sidecar else self._want(wandb, log_available, uses_wandb)
        out = Decision([], [], None)
        if want and want != self.status and not (self.status is None and want == UNREACHABLE
                                                 and now - self.started < self.startup_grace_s):  # fmt: skip
            out.transition = Transition(want, self.status, reason, wandb.url)
            if self.status == WANDB_OK and self.held and want != SIDECAR:
                out.items.extend(item for _, item in self.held)
                self.last_log_at = now
                self.held.clear()
            self.status = want
            if want == SIDECAR:
                self.held.clear()
        if want:
            self.reason = reason
        for item in items:
            if not item.is_metric:
                out.items.append(item)
            elif self.status == SIDECAR:
                continue  # the sidecar has this step's metrics, with their exact names
            elif self.status != WANDB_OK:
                out.items.append(item)
                self.last_log_at = now
            elif not wandb.finished:
                if len(self.held) == self.held.maxlen:
                    self.dropped += 1
                self.held.append((now, item))
        if wandb.finished:
            self.held.clear()  # W&B has the whole run; what the log printed after it is not needed
        if self.status == WANDB_OK:
            out.rows = new_rows
            for row in new_rows:
                if row.ts is not None:
                    while self.held and self.held[0][0] <= row.ts + COVER_SLACK_S:
                        self.held.popleft()
        return out

    def _want(self, wandb: Reading, log_available: bool, uses_wandb: bool | None) -> tuple[str, str]:
        """The status the sources call for and why; ("", "") while it cannot be told yet."""
        if wandb.available and not self.stale:
            return WANDB_OK, wandb.reason
        if uses_wandb is None:
            return "", ""
        if not uses_wandb and log_available:
            return LOG, wandb.reason
        why = (f"W&B has recorded nothing for {self.stale_s:.0f}s while the log printed metrics"
               if wandb.available else wandb.reason)  # fmt: skip
        if log_available:
            return LOG_FALLBACK, why  # the run uses W&B, and it is missing
        return UNREACHABLE, f"{why}; and the log cannot be read"

"""Which run and which event a daemon is handling now, for its log lines (`--log-format json`).

A daemon sets them around the work it does for one run or one event (`with log_context(run=..., event_id=...)`)
and every log call inside, in any module, carries them: an operator greps one run's lines out of a mixed log
without each call site repeating the run in its message. Context variables, so a thread (the RQ worker's
heartbeat) or an asyncio task sees only its own. A call's `extra={"run": ..., "event_id": ...}` wins.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator

RUN: contextvars.ContextVar[str | None] = contextvars.ContextVar("trainwarden_log_run", default=None)
EVENT_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("trainwarden_log_event_id", default=None)
FIELDS = ("run", "event_id")


@contextlib.contextmanager
def log_context(*, run: str | None = None, event_id: str | None = None) -> Iterator[None]:
    """Within the block, log records carry `run` and `event_id` (a None leaves the outer value in place)."""
    tokens = []
    if run is not None:
        tokens.append((RUN, RUN.set(run)))
    if event_id is not None:
        tokens.append((EVENT_ID, EVENT_ID.set(event_id)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


class ContextFilter(logging.Filter):
    """Copies the current run and event id onto each record (`record.run`, `record.event_id`), unless the
    call's `extra=` gave them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "run", None) is None:
            record.run = RUN.get()
        if getattr(record, "event_id", None) is None:
            record.event_id = EVENT_ID.get()
        return True

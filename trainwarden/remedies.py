"""What to do about an error raised where the command line's options are not known (the event log), said
after its message by the CLI and by the MCP server alike."""

from __future__ import annotations

from trainwarden.core.errors import TrainwardenError
from trainwarden.events.errors import StoreError, StoreUnavailable


def remedy_for(exc: TrainwardenError, *, start_here: bool = False) -> str | None:
    """What to do, for errors raised where the command line's options are not known (the event log).
    `start_here`: nothing may run yet on this machine, so the pointer is the command that starts it all."""
    if isinstance(exc, StoreUnavailable) and start_here:
        return ("nothing runs yet? `trainwarden up --redis` starts Redis and the agent, dispatcher, worker and bot "
                "on this machine (README: Quick start); or point trainwarden at your Redis with --redis-url or "
                "REDIS_URL")  # fmt: skip
    if isinstance(exc, StoreUnavailable):
        return "is Redis running there? Start it, or point trainwarden at yours with --redis-url or REDIS_URL"
    if isinstance(exc, StoreError):
        return "check the Redis URL (password, a primary that accepts writes) and that Redis has memory left"
    return None

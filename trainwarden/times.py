"""Times on the command line: `2026-12-02T17:38`, unix seconds, or a duration ago (`30m`, `2h`)."""

from __future__ import annotations

from datetime import datetime

from trainwarden.errors import UsageError
from trainwarden.policies.durations import parse_duration

HINT = "an ISO time like 2026-12-02T17:38 (local time unless it says +00:00), unix seconds, or a duration ago like 30m"


def parse_time(text: str, *, now: float, option: str) -> float:
    value = text.strip()
    try:
        return float(value)
    except ValueError:
        pass
    ago = parse_duration(value)
    if ago is not None:
        return now - ago
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected {HINT}") from None

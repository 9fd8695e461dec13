"""Times on the command line: `2026-12-02T17:38`, unix seconds, or a duration ago (`30m`, `1h30m`, `2d`)."""

from __future__ import annotations

import re
from datetime import datetime

from trainwarden.errors import UsageError
from trainwarden.policies.durations import duration_problem, parse_duration

HINT = (
    "an ISO time like 2026-12-02T17:38 (local time unless it says +00:00), unix seconds, "
    "or a duration ago like 30m or 1h30m"
)

LOOKS_LIKE_DURATION = re.compile(r"^\d+(?:\.\d+)?\s*[^\d\s.:-]")


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
        pass
    if LOOKS_LIKE_DURATION.match(value):  # say what is wrong with the duration, not only what is expected
        raise UsageError(f"{option}: {duration_problem(value, expected=HINT)}")
    raise UsageError(f"{option} {text!r}: expected {HINT}")

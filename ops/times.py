"""Times on the command line: `2026-12-02T17:38`, a clock time (`09:51`), unix seconds, or a duration ago
(`30m`, `1h30m`, `2d`, also written `30m ago`)."""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta

from trainwarden.core.errors import UsageError
from trainwarden.policies.durations import duration_problem, parse_duration

HINT = (
    "an ISO time like 2026-12-02T17:38 (local time unless it says +00:00), a clock time like 09:51 "
    "(the last one: today's, or yesterday's if it has not come yet), unix seconds, "
    "or a duration ago like 30m or 1h30m (also written '30m ago')"
)

LOOKS_LIKE_DURATION = re.compile(r"^\d+(?:\.\d+)?\s*[^\d\s.:-]")
CLOCK = re.compile(r"^\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?$")
AGO = re.compile(r"\s+ago$", re.IGNORECASE)


def parse_time(text: str, *, now: float, option: str) -> float:
    value = text.strip()
    try:
        return float(value)
    except ValueError:
        pass
    value = AGO.sub("", value)  # "30m ago" is what people write; the duration is the same
    ago = parse_duration(value)
    if ago is not None:
        return now - ago
    if CLOCK.match(value):
        return _clock(value, now=now, option=option)
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        pass
    if LOOKS_LIKE_DURATION.match(value):  # say what is wrong with the duration, not only what is expected
        raise UsageError(f"{option}: {duration_problem(value, expected=HINT)}")
    raise UsageError(f"{option} {text!r}: expected {HINT}")


def _clock(value: str, *, now: float, option: str) -> float:
    """The latest local `HH:MM[:SS]` at or before `now` (a time still to come today means yesterday's)."""
    try:
        clock = time.fromisoformat(value if len(value.split(":", maxsplit=1)[0]) == 2 else f"0{value}")
    except ValueError:
        raise UsageError(f"{option} {value!r}: not a clock time (hours 0-23, minutes 0-59)") from None
    today = datetime.fromtimestamp(now)
    at = datetime.combine(today.date(), clock)
    if at > today:
        at -= timedelta(days=1)
    return at.timestamp()

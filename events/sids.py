"""Redis stream ids (`<ms>-<n>`): parse, order, and the next id, as pure functions.

Stream ids compare as pairs of integers, not as strings ("9-0" < "10-0"), and archives are
named and trimmed by them, so every comparison goes through `sid_key`.
"""

from __future__ import annotations

import re

SID_RE = re.compile(r"^(\d{1,20})-(\d{1,20})$")
MAX_PART = 2**64 - 1


def is_sid(text: str) -> bool:
    return bool(SID_RE.match(text))


def sid_key(sid: str) -> tuple[int, int]:
    """`'1700000000000-3'` -> `(1700000000000, 3)`; a bare `'5'` means `'5-0'` (as Redis reads it)."""
    ms, _, n = sid.partition("-")
    return int(ms), int(n or 0)


def sid_successor(sid: str) -> str:
    """The smallest id above `sid`: `XTRIM MINID` with it removes exactly the entries up to `sid`."""
    ms, n = sid_key(sid)
    if n < MAX_PART:
        return f"{ms}-{n + 1}"
    return f"{ms + 1}-0"

"""The in-memory store's reading of XRANGE bounds (events/memory.py), as Redis reads them."""

from __future__ import annotations

import pytest
from trainwarden.events.memory import HIGHEST, LOWEST, range_end, range_start
from trainwarden.events.sids import MAX_PART


@pytest.mark.parametrize(
    ("bound", "start", "end"),
    [
        ("-", LOWEST, None),
        ("+", None, HIGHEST),
        ("5-3", (5, 3), (5, 3)),
        ("5", (5, 0), (5, MAX_PART)),  # a bare millisecond: all of it
        ("(5-3", (5, 4), (5, 2)),  # exclusive
        ("(5-0", (5, 1), (4, MAX_PART)),
        (f"(5-{MAX_PART}", (6, 0), (5, MAX_PART - 1)),
    ],
)
def test_range_bounds_read_as_redis_reads_them(bound: str, start: tuple[int, int] | None, end: tuple[int, int] | None):
    if start is not None:
        assert range_start(bound) == start
    if end is not None:
        assert range_end(bound) == end

"""Pure: which of a fixed set of substrings a line holds, found in one pass of one compiled expression.

The format table (agent.formats) gives each format a hint, a substring every line of it holds; testing each
hint with `in` costs one scan of the line per format, and the agent reads every line. Here the hints are one
alternation, longest first, scanned once (`findall`, in C). Non-overlapping matching would miss a hint inside
or overlapping another, so each match stands for every hint it holds, and each pair of hints that overlap (a
suffix of one the start of another: `all ` and ` avg` in `all avg`) is an alternative of its own, longer than
either: at any position the longest alternative that matches there is taken, and it holds every hint that
starts inside it. So the set found is exactly `{h for h in hints if h in line}` (tests/unit/test_hints.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_ALTERNATIVES = 512  # overlaps of overlaps stop somewhere; a set of hints past this is refused at import


def _overlaps(a: str, b: str) -> list[str]:
    """`a` followed by the rest of `b` for each proper suffix of `a` that `b` starts with (neither holding the
    other)."""
    if a in b or b in a:
        return []
    return [a + b[k:] for k in range(1, min(len(a), len(b))) if a.endswith(b[:k])]


class Substrings:
    """The substrings of `words` a line holds, in one regular-expression pass (see the module docstring)."""

    __slots__ = ("_findall", "_holds", "words")

    def __init__(self, words: Iterable[str]) -> None:
        self.words = frozenset(w for w in words if w)
        alternatives = set(self.words)
        new = set(alternatives)
        while new:
            found = {c for a in alternatives for b in alternatives for c in _overlaps(a, b)} - alternatives
            if len(alternatives) + len(found) > MAX_ALTERNATIVES:
                raise ValueError(f"{len(self.words)} substrings overlap in too many ways to be found in one pass")
            alternatives |= found
            new = found
        ordered = sorted(alternatives, key=lambda a: (-len(a), a))
        self._findall = re.compile("|".join(map(re.escape, ordered))).findall if ordered else None
        # each alternative matched stands for the words it holds
        self._holds = {a: frozenset(w for w in self.words if w in a) for a in alternatives}

    def of(self, line: str) -> frozenset[str]:
        """The words that occur in `line`."""
        if self._findall is None:
            return frozenset()
        found = self._findall(line)
        if not found:
            return frozenset()
        holds = self._holds
        if len(found) == 1:
            return holds[found[0]]
        return frozenset().union(*[holds[a] for a in set(found)])

"""Pure: whether a regular expression can backtrack catastrophically. A `log_pattern` runs on every log line
the agent reads (policies/kinds/signals.py); `(a+)+$` against 30 `a`s and a `!` takes Python's engine
minutes, and the worker with it. Checked when the policy is read, so such a pattern never loads.

What is refused: a repeat (`*`, `+`, `{n,}`, `{n,m}` with m > 1) whose body can itself match a varying
number of characters through another unbounded repeat (`(a+)+`, `(a*b?)*`, `(\\w+\\s?)*`), and a repeat over
alternatives where one branch is a prefix of another (`(a|ab)*`, `(\\d|\\d\\d)+`). These are the shapes
behind the ReDoS advisories; a rare false refusal costs a rewrite, a missed one costs the worker."""

from __future__ import annotations

import re
from re import _constants as _c  # type: ignore[attr-defined]  # the parser `re` itself uses (3.11+)
from re import _parser as _p  # type: ignore[attr-defined]
from typing import Any

_POSSESSIVE = _c.POSSESSIVE_REPEAT  # `a++`: never backtracks
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT, _POSSESSIVE}


def catastrophic(pattern: str) -> str | None:
    """Why `pattern` can backtrack catastrophically (the offending part, in words), or None."""
    try:
        parsed = _p.parse(pattern)
    except re.error:
        return None  # not a pattern at all: re.compile says why
    return _walk(list(parsed), inside_repeat=False)


def _walk(items: list[tuple[Any, Any]], *, inside_repeat: bool) -> str | None:
    for op, av in items:
        if op in _REPEATS:
            _, high, body = av
            body = list(body)
            if (high is _c.MAXREPEAT or high > 1) and op is not _POSSESSIVE:
                if _varies(body):
                    return "a repeat of something that itself repeats, like (a+)+"
                overlap = _overlapping_branches(body)
                if overlap:
                    return overlap
            found = _walk(body, inside_repeat=True)
            if found:
                return found
        elif op is _c.SUBPATTERN:
            found = _walk(list(av[-1]), inside_repeat=inside_repeat)
            if found:
                return found
        elif op is _c.BRANCH:
            for branch in av[1]:
                found = _walk(list(branch), inside_repeat=inside_repeat)
                if found:
                    return found
    return None


def _varies(items: list[tuple[Any, Any]]) -> bool:
    """Whether `items` holds an unbounded repeat (directly, in a group or a branch): a varying length."""
    for op, av in items:
        if op in _REPEATS and av[1] is _c.MAXREPEAT and op is not _POSSESSIVE:
            return True
        if op in _REPEATS and _varies(list(av[2])):
            return True
        if op is _c.SUBPATTERN and _varies(list(av[-1])):
            return True
        if op is _c.BRANCH and any(_varies(list(b)) for b in av[1]):
            return True
    return False


def _overlapping_branches(items: list[tuple[Any, Any]]) -> str | None:
    """A repeated group of alternatives where one literal branch is a prefix of another: (a|ab)*."""
    for op, av in items:
        if op is _c.SUBPATTERN:
            return _overlapping_branches(list(av[-1]))
        if op is _c.BRANCH:
            texts = [_literal(list(b)) for b in av[1]]
            known = [x for x in texts if x is not None]
            for i, a in enumerate(known):
                for b in known[i + 1 :]:
                    if a.startswith(b) or b.startswith(a):
                        return "a repeat of alternatives that can start the same way, like (a|ab)* or (\\d|\\d\\d)+"
    return None


def _literal(items: list[tuple[Any, Any]]) -> str | None:
    """The text a branch of plain characters matches (a class counts as its own token), else None."""
    out = []
    for op, av in items:
        if op is _c.LITERAL:
            out.append(chr(av))
        elif op is _c.IN or op is _c.ANY:
            out.append("\0" + repr(av))  # one character of a class: equal classes overlap
        else:
            return None
    return "".join(out)

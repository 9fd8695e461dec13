"""The one format of a duration (`fmt_duration`), its units and the one grammar that parses one back
(`parse_duration`): shown by the policies' messages and by the words of a fault line (faults/),
parsed from policy files, settings files (every `*_s` setting: core/yamlfile.Reader.seconds), `/snooze` and
the CLI, none of which may import the others. policies/durations.py adds the run's progress (`500 steps`).

Grammar: one or more `<number><unit>` parts, largest unit first, each unit once; units `ms`, `s`, `m`,
`h`, `d`; a number may have decimals: `90s`, `10m`, `1h30m`, `1.5h`, `2d`, `500ms`. No spaces and no
bare numbers (`60`: seconds or minutes?). Strict on purpose: `10 mins` is an error that says what is
wrong and shows an accepted duration, never a silent zero.
"""

from __future__ import annotations

import re

UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}  # largest first: the order parts go in


def _units_shown(s: int) -> tuple[str, str]:
    for big, small in (("d", "h"), ("h", "m"), ("m", "s")):
        if s >= UNITS[big]:
            return big, small
    return "s", "s"


def fmt_duration(seconds: float) -> str:
    """The one way a duration is shown: 42 -> '42s', 427 -> '7m07s', 5400 -> '1h30m', 90060 -> '1d01h'."""
    if 0 < seconds < 0.9995:
        return f"{round(seconds * 1000)}ms"
    s = int(max(0.0, seconds) + 0.5)
    step = int(UNITS[_units_shown(s)[1]])
    s = (s + step // 2) // step * step  # rounded to the smaller unit shown; 59m59.6s becomes 1h
    big, small = _units_shown(s)
    if big == "s":
        return f"{s}s"
    whole, rest = divmod(s, int(UNITS[big]))
    return f"{whole}{big}" + (f"{rest // int(UNITS[small]):02d}{small}" if rest else "")


_ORDER = {unit: i for i, unit in enumerate(UNITS)}
_PART_RE = re.compile(r"(\d+(?:\.\d+)?)([^\d.]*)")

DURATION_HINT = "a duration like 30s, 10m, 2h or 1h30m"


def _scan(text: str) -> tuple[float | None, str]:
    """Seconds and '' for a duration; None and what is wrong otherwise."""
    if not text:
        return None, "it is empty"
    if text.startswith("-"):
        return None, "a duration is never negative"
    total, pos, last = 0.0, 0, -1
    while pos < len(text):
        m = _PART_RE.match(text, pos)
        if not m:
            return None, f"{text[pos:]!r} is not a number followed by a unit"
        number, unit = m.groups()
        if not unit:
            return None, f"{number} has no unit: write {number}s for seconds, {number}m for minutes"
        if unit not in UNITS:
            return None, f"{unit!r} is not a unit (ms, s, m, h or d)"
        if _ORDER[unit] <= last:
            return None, "the units go from the largest to the smallest, each once (1h30m, not 30m1h)"
        total += float(number) * UNITS[unit]
        pos, last = m.end(), _ORDER[unit]
    return total, ""


def parse_duration(text: str) -> float | None:
    """Seconds, or None when `text` is not a duration (`duration_problem` says why)."""
    return _scan(text.strip())[0]


def duration_problem(text: str, *, expected: str = DURATION_HINT) -> str:
    """Why `text` is not a duration, and what is expected, for error messages ('' when it is one)."""
    compact = text.strip()
    seconds, why = _scan(compact)
    if seconds is not None:
        return ""
    squeezed = "".join(compact.split())
    if squeezed != compact:
        fixed, why = _scan(squeezed)
        why = f"write it without spaces: {fmt_duration(fixed)}" if fixed is not None else why
    return f"{text!r} is not a duration: {why}; expected {expected}"

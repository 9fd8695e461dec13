"""The one format of a duration (`fmt_duration`) and its units: shown by the policies' messages and by the
words of a fault line (events/signatures), which cannot import the policies. The grammar that parses a
duration back is policies/durations.py."""

from __future__ import annotations

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

"""Facts as a person reads them (CLI views, reports, Slack notices): a fact that is not known is said in
words, never as `None`; a float is shown to 6 significant digits (`nan`, `inf` as they are)."""

from __future__ import annotations

import math
from typing import Any


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return str(value) if not math.isfinite(value) else f"{value:.6g}"
    return str(value)


def said(value: Any, missing: str = "?") -> str:
    """`value` as text, or `missing` (words: `not recorded`, `an unknown host`) where it is absent."""
    return missing if value is None or value == "" else fmt(value)

"""Facts as a person reads them (CLI views, reports, Slack notices): a fact that is not known is said in
words, never as `None`; a float is shown to 6 significant digits (`nan`, `inf` as they are)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return str(value) if not math.isfinite(value) else f"{value:.6g}"
    return str(value)


def said(value: Any, missing: str = "?") -> str:
    """`value` as text, or `missing` (words: `not recorded`, `an unknown host`) where it is absent."""
    return missing if value is None or value == "" else fmt(value)


ELLIPSIS = "…"
WORD_SEARCH = 0.6  # a cut looks back for a space this far into the text; a text without one is cut at the limit


def shorten(text: str, limit: int) -> str:
    """`text` if it fits in `limit` characters, else its head cut at a word boundary and ended with `…`.

    One function for every reason, anomaly and label cut to fit: a cut in mid-word ("its processes have
    WAN") reads as a different word; a whole word dropped and marked reads as what it is."""
    if len(text) <= limit:
        return text
    if limit <= len(ELLIPSIS):
        return text[:limit]
    head = text[: limit - len(ELLIPSIS) + 1]  # one more: a space right after the kept part is a boundary too
    cut = head.rfind(" ")
    if cut < int(limit * WORD_SEARCH):
        cut = limit - len(ELLIPSIS)  # one long token (a path, a URL): cut inside it rather than drop it all
    return text[:cut].rstrip(" ,;:(-") + ELLIPSIS


def local_time(ts: float) -> str:
    """`2026-12-06 14:03 CET`: a time as the person at this terminal reads it (the training-check report's
    timestamps), in the machine's zone, named."""
    return datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M %Z")

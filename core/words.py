"""Facts as a person reads them (CLI views, reports, Slack notices): a fact that is not known is said in
words, never as `None`; a float is shown to 6 significant digits (`nan`, `inf` as they are)."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
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

    One cut for every reason, anomaly and label cut to fit: a cut in mid-word ("its processes have WAN")
    reads as a different word; a whole word dropped and marked reads as what it is."""
    if len(text) <= limit:
        return text
    if limit <= len(ELLIPSIS):
        return text[:limit]
    return text[: word_end(text, limit - len(ELLIPSIS))] + ELLIPSIS


def word_end(text: str, keep: int) -> int:
    """Where to cut `text` to keep at most `keep` characters: after the last whole word that fits (trailing
    spaces and `,;:(-` dropped), or at `keep` when no space is found in its last 40% (one long token: a
    path, a URL, is cut inside rather than dropped). Texts cut with a marker of their own (bot/limits.py) use
    it too."""
    if len(text) <= keep:
        return len(text)
    cut = text[: keep + 1].rfind(" ")  # a space right after the kept part is a boundary too
    if cut < int(keep * WORD_SEARCH):
        return keep
    return len(text[:cut].rstrip(" ,;:(-"))


def local_time(ts: float) -> str:
    """`2026-12-06 14:03 CET`: a time as the person at this terminal reads it (the training-check report's
    timestamps), in the machine's zone, named."""
    return datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M %Z")


CLOSE = 0.6  # difflib's default similarity: `lauch` -> `launch`, `nc-nam` -> `nc-nan`; `xyz` suggests nothing


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """Pure: the candidate most like `word` (in any case), if one is close enough to be what was meant: the
    one "did you mean" of the command line (commands, options, choices, run names)."""
    folded = {c.lower(): c for c in candidates}
    found = difflib.get_close_matches(word.lower(), list(folded), n=1, cutoff=CLOSE)
    return folded[found[0]] if found else None

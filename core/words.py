"""Facts as a person reads them (CLI views, reports, Slack notices): a fact that is not known is said in
words, never as `None`; a float is shown to 6 significant digits (`nan`, `inf` as they are)."""

from __future__ import annotations

import difflib
import math
import signal
import time
from collections.abc import Iterable, Sequence
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
SPARK = "▁▂▃▄▅▆▇█"
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


def exit_status(code: object) -> str:
    """How a process ended, from its exit code as the wrapper wrote it (128+N: killed by signal N)."""
    if type(code) is not int:
        return "ended with an unknown exit code (it left none: killed, or its host went down)"
    signo = code - 128 if code > 128 else -code if code < 0 else 0
    if signo not in signal.valid_signals():  # 0, or past the last signal (exit 255): a plain exit code
        return f"exited with code {code}"
    name = f" ({signal.Signals(signo).name})" if signo in {s.value for s in signal.Signals} else ""
    return f"was killed by signal {signo}{name}, exit code {code}"


def clock(ts: float) -> str:
    return time.strftime("%H:%M UTC", time.gmtime(ts))


def sparkline(values: Sequence[float]) -> str:
    """The finite values among `values` as block characters; "" when fewer than two are finite.

    A non-finite value is left out, not drawn: the number printed beside the line already says `nan`
    or `inf`, and a row of placeholder characters read as noise, not as "the loss went NaN"."""
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < 2:
        return ""
    low, high = min(finite), max(finite)
    span = (high - low) or 1.0
    return "".join(SPARK[int((v - low) / span * (len(SPARK) - 1))] for v in finite)


def number(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


CLOSE = 0.6  # difflib's default similarity: `lauch` -> `launch`, `nc-nam` -> `nc-nan`; `xyz` suggests nothing


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """Pure: the candidate most like `word` (in any case), if one is close enough to be what was meant: the
    one "did you mean" of the command line (commands, options, choices, run names)."""
    folded = {c.lower(): c for c in candidates}
    found = difflib.get_close_matches(word.lower(), list(folded), n=1, cutoff=CLOSE)
    return folded[found[0]] if found else None

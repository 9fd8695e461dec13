"""JSON from untrusted text (stream entries, training log lines, W&B values) that fails only with ValueError.

`json.loads` recurses once per nesting level, so `[[[[...` a few thousand levels deep raises
RecursionError (not ValueError) and a decoder that catches only ValueError lets one line or one
stream entry take down whatever reads it. `loads` refuses text nested deeper than `MAX_DEPTH`
before parsing (a cheap count of brackets first; a scan that skips strings only when the count is
high), and turns RecursionError and MemoryError into ValueError as a last resort.

A numeral too large for a float (`1e400`) parses as Inf. That is an overflow in the encoding, not
a measurement: `float_literal` refuses it, while the words `nan`, `inf`, `Infinity` (what a
trainer prints or JSON's NaN/Infinity) stay what they say.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

MAX_DEPTH = 64  # nesting levels; our own events use a handful
_STRING_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # unrolled: linear even on a stray quote
_BRACKET_RE = re.compile(r"[\[\]{}]")


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether `text` opens more than `limit` nested arrays/objects (brackets inside strings do not count)."""
    if text.count("[") + text.count("{") <= limit:
        return False  # the usual case: two C-speed counts
    depth = 0
    for m in _BRACKET_RE.finditer(_STRING_RE.sub("", text)):
        if m.group() in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def float_literal(text: str) -> float:
    """`float(text)`, refusing a numeral that overflows to +/-Inf (`1e400`); `nan`/`inf` words are kept."""
    value = float(text)
    if not math.isfinite(value) and "n" not in text and "N" not in text:  # nan, inf, Infinity all have an n
        raise ValueError(f"number out of range: {text[:40]}")
    return value


def loads(text: str, *, max_depth: int = MAX_DEPTH, parse_float: Callable[[str], Any] | None = None) -> Any:
    """`json.loads` (Python's dialect: NaN/Infinity accepted) that raises ValueError and nothing else."""
    if too_deep(text, max_depth):
        raise ValueError(f"nested deeper than {max_depth} levels")
    try:
        if parse_float is None:
            return _decode(text)
        return json.JSONDecoder(parse_float=parse_float).decode(text)
    except (RecursionError, MemoryError) as exc:
        raise ValueError(f"cannot be parsed ({type(exc).__name__})") from None
    except ValueError:
        raise
    except Exception as exc:  # a parse_float hook's own error, or anything else: still just bad text
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


def overflows(text: str) -> bool:
    """Whether `text` (valid JSON) holds a numeral too large for a float: its Inf is an overflow, not a value."""
    try:
        json.JSONDecoder(parse_float=float_literal).decode(text)
    except ValueError:
        return True
    except (RecursionError, MemoryError):
        return True
    return False


_decode = json.JSONDecoder().decode

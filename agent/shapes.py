"""Lines of one shape read once: a trainer prints the same line with new numbers thousands of times.

A line's shape is its text with every run of digits replaced (`step=# loss=#.# lr=#e-#`). When a line's metrics
are all its own numerals taken as printed (each value equal to exactly one numeral of the line, converted as
the pair readers convert: `12` an int, `2.5` and `3e-4` floats, a `-` before it kept), the next lines of that
shape are read by converting the numerals at the same places, and no format is tried again (agent.formats).
What keeps that exact:

- a shape is used only after a second line of it, read in full as well, gave the same metrics both ways;
- only formats whose values are numerals as printed are learned (not a bar's computed step, not the fp16
  format's constant `overflow: 1`);
- a line with a word for a value (`nan`, `inf`) has another shape (no digits where the numeral was), and
  NaN and Inf are never learned: such a line is always read in full;
- a numeral that does not convert plainly (`1e400`, an integer too long) sends its line through the full
  reading, and so does every `RECHECK_EVERY`-th line of a shape: a mismatch forgets the shape for good.

Bounded: at most `MAX_SHAPES` shapes (then no new ones are learned).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from trainwarden.agent.pairs import Metrics

MAX_SHAPES = 2048
RECHECK_EVERY = 64  # every this many lines of a learned shape, one is read in full again and compared
MAX_PLAIN_CHARS = 300  # a longer numeral may be too long for an int: its line is read in full
LEARN_TRIES = 8  # lines of a shape read in full without learning it before it is given up
DIGITS_RE = re.compile(r"\d+")
# a numeral as the pair readers read one (agent.pairs): digits, a fraction, an exponent; a sign before it is
# part of the shape
NUMERAL_RE = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")

F = TypeVar("F")
# per metric, in the order read: name, index of its numeral in the line, negated, int (else float)
Template = tuple[tuple[str, int, bool, bool], ...]


def same(a: Metrics, b: Metrics) -> bool:
    """The same names in the same order with the same values, types and signs (`-0.0` is not `0.0`)."""
    return list(a) == list(b) and all(type(v) is type(b[k]) and repr(v) == repr(b[k]) for k, v in a.items())


def plain(numerals: list[str]) -> bool:
    """Every numeral converts plainly: none overflows a float (`1e400`) or is too long for an int."""
    for text in numerals:
        if len(text) > MAX_PLAIN_CHARS or (("e" in text or "E" in text) and _convert(text, False) is None):
            return False
    return True


def template_of(metrics: Metrics, numerals: list[str]) -> Template | None:
    """How `metrics` were read from `numerals`, or None when a value is not exactly one numeral as printed."""
    if not plain(numerals):
        return None
    out = []
    for name, value in metrics.items():
        if type(value) is float and not math.isfinite(value):
            return None
        found = None
        for i, text in enumerate(numerals):
            number = _convert(text, type(value) is int)
            if number is None:
                continue
            for negated in (False, True) if repr(-number) != repr(number) else (False,):
                if repr(-number if negated else number) == repr(value):
                    if found is not None:
                        return None  # two numerals (or both signs) read the same: which one is unknown
                    found = (name, i, negated, type(value) is int)
        if found is None:
            return None
        out.append(found)
    return tuple(out)


def _convert(text: str, whole: bool) -> float | int | None:
    try:
        if whole:
            return int(text) if text.isdigit() else None
        number = float(text)
    except ValueError:  # an integer too long to convert
        return None
    return number if number - number == 0.0 else None  # an overflowing numeral (`1e400`): not plain


def apply(template: Template, numerals: list[str]) -> Metrics | None:
    """The metrics of a line of a learned shape, or None when a numeral does not convert plainly."""
    if not plain(numerals):
        return None
    out: Metrics = {}
    for name, i, negated, whole in template:
        number = _convert(numerals[i], whole)
        if number is None:
            return None
        out[name] = -number if negated else number
    return out


@dataclass(slots=True)
class Shape(Generic[F]):
    template: Template | None  # None: not learned (yet, or given up)
    fmt: F | None
    count: int  # lines since the last recheck; while not trusted, lines read trying to learn it
    trusted: bool = False  # confirmed by a second line (or given up: then always read in full)


class ShapeCache(Generic[F]):
    """Learned shapes for one reader function `read(line) -> (metrics, format)`; `learnable(format)` says which
    formats' values are numerals as printed."""

    def __init__(self, read: Callable[[str], tuple[Metrics, F | None]], learnable: Callable[[F], bool]) -> None:
        self.read = read
        self.learnable = learnable
        self.shapes: dict[str, Shape[F]] = {}

    def __call__(self, line: str) -> tuple[Metrics, F | None]:
        shape = DIGITS_RE.sub("#", line)
        entry = self.shapes.get(shape)
        if entry is not None and entry.trusted:
            if entry.template is None:
                return self.read(line)
            entry.count += 1
            if entry.count < RECHECK_EVERY:
                found = apply(entry.template, NUMERAL_RE.findall(line))
                if found is not None:
                    return found, entry.fmt
                return self.read(line)
            entry.count = 0
        metrics, fmt = self.read(line)
        self._learn(shape, entry, line, metrics, fmt)
        return metrics, fmt

    def _learn(self, shape: str, entry: Shape[F] | None, line: str, metrics: Metrics, fmt: F | None) -> None:
        """Learn, confirm or recheck the shape of a line just read in full."""
        if entry is not None and entry.trusted:  # a recheck of a learned shape
            assert entry.template is not None
            found = apply(entry.template, NUMERAL_RE.findall(line))
            if found is not None and not (fmt is entry.fmt and same(found, metrics)):
                entry.template = None  # the shape reads differently after all: always in full from now on
            return
        template = None
        if metrics and fmt is not None and self.learnable(fmt):
            template = template_of(metrics, NUMERAL_RE.findall(line))
        if entry is None:
            if len(self.shapes) < MAX_SHAPES:
                self.shapes[shape] = Shape(template, fmt, 1)
            return
        if entry.template is not None and template == entry.template and fmt is entry.fmt:
            entry.count, entry.trusted = 0, True  # a second line read the same way: trusted
            return
        entry.template, entry.fmt, entry.count = template, fmt, entry.count + 1
        if entry.count >= LEARN_TRIES:
            entry.template, entry.trusted = None, True  # given up: read in full, without trying again

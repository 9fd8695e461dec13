"""Learned line shapes (agent.shapes) read every line exactly as the full reading does (agent.formats)."""

from __future__ import annotations

import math
from pathlib import Path

from trainwarden.agent import formats
from trainwarden.agent.formats import LEARNED, Format, Metrics
from trainwarden.agent.prefixes import strip_prefix
from trainwarden.agent.shapes import RECHECK_EVERY, ShapeCache, same

from tests.helpers import REAL_CORPUS, dev_corpus

DATA = Path(__file__).resolve().parent.parent / "data" / "logs"


def full(line: str) -> tuple[Metrics, Format | None]:
    try:
        return formats._read(strip_prefix(line))
    except (ValueError, OverflowError):
        return {}, None


class Counted:
    """The full reading, counting its calls: how many lines the cache did not answer."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, line: str) -> tuple[Metrics, Format | None]:
        self.calls += 1
        return formats._read(line)


def cached_reader() -> tuple[ShapeCache[Format], Counted]:
    counted = Counted()
    return ShapeCache(counted, lambda fmt: fmt.name in LEARNED), counted


def read(cache: ShapeCache[Format], line: str) -> tuple[Metrics, Format | None]:
    try:
        return cache(strip_prefix(line))
    except (ValueError, OverflowError):
        return {}, None


def assert_same_reading(lines: list[str], cache: ShapeCache[Format]) -> None:
    for line in lines:
        got, want = read(cache, line), full(line)
        assert got[1] is want[1], line
        assert same(got[0], want[0]) or _nan_same(got[0], want[0]), (line, got[0], want[0])


def _nan_same(a: Metrics, b: Metrics) -> bool:
    return list(a) == list(b) and all(
        type(v) is type(b[k]) and (repr(v) == repr(b[k]) or (math.isnan(v) and math.isnan(b[k]))) for k, v in a.items()
    )


def corpus_lines() -> list[str]:
    files = sorted(DATA.rglob("*.log")) + [REAL_CORPUS / r["file"] for r in dev_corpus()]
    return [line for f in files for line in f.read_text(errors="replace").splitlines()]


def test_every_corpus_line_reads_the_same_learned_or_not() -> None:
    cache, counted = cached_reader()
    lines = corpus_lines()
    assert len(lines) > 1000
    for _ in range(3):  # the later passes meet shapes learned in the earlier ones
        assert_same_reading(lines, cache)
    assert counted.calls < 3 * len(lines)  # some lines were answered from their shape


def test_a_steady_metric_line_is_read_from_its_shape() -> None:
    cache, counted = cached_reader()
    lines = [f"step={i} loss={2 + i / 1000:.4f} grad_norm=0.9 lr=3e-4" for i in range(10, 10 + 5 * RECHECK_EVERY)]
    assert_same_reading(lines, cache)
    assert counted.calls <= 2 + 2 * len(lines) // RECHECK_EVERY + 2  # learned, confirmed, then rechecked only


def test_nan_inf_overflow_and_signs_read_in_full() -> None:
    cache, _ = cached_reader()
    steady = [f"step={i} loss=2.{i}5 grad_norm=0.9 lr=3e-4" for i in range(10, 20)]
    odd = [
        "step=21 loss=nan grad_norm=0.9 lr=3e-4",
        "step=22 loss=inf grad_norm=0.9 lr=3e-4",
        "step=23 loss=2.5 grad_norm=0.9 lr=1e400",  # the same shape as the steady lines: the overflow is left out
        "step=24 loss=-2.5 grad_norm=0.9 lr=3e-4",
        "step=25 loss=-0.0 grad_norm=0.9 lr=3e-4",
        "step=" + "9" * 5000 + " loss=2.5 grad_norm=0.9 lr=3e-4",  # an integer too long to convert
        "step=26 loss=2.5 grad_norm=0.9 lr=3e-4 epoch=1",
        "step=27 loss=2.5 grad_norm=2.5 lr=3e-4",  # two numerals of one value
    ]
    assert_same_reading(steady + odd + steady + odd, cache)
    nan = read(cache, "step=28 loss=nan grad_norm=0.9 lr=3e-4")[0]["loss"]
    assert isinstance(nan, float) and math.isnan(nan)


def test_a_shape_that_reads_otherwise_later_is_forgotten() -> None:
    """A shape whose lines stop being read as learned (here: the reader's answer changes) goes back to full
    reading at the next recheck, and stays there."""
    answers: dict[str, Metrics] = {}

    def reader(line: str) -> tuple[Metrics, Format | None]:
        return answers.get(line, {"step": int(line.split("=")[1])}), formats.GENERAL

    cache = ShapeCache(reader, lambda fmt: True)
    for i in range(RECHECK_EVERY):
        assert cache(f"step={i}")[0] == {"step": i}
    answers.update({f"step={i}": {"step": -1} for i in range(1000)})
    got = [cache(f"step={i}")[0] for i in range(RECHECK_EVERY, 3 * RECHECK_EVERY)]
    assert got[-1] == {"step": -1}  # read in full again after the recheck
    assert all(g == {"step": -1} for g in got[got.index({"step": -1}) :])

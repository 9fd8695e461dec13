"""The parser's hot path (issue 40): a line with no numeral is offered only to the formats whose empty answer
stands, which gives exactly what walking the whole table gives; fault and notable lines are still tagged."""

from __future__ import annotations

import random

import pytest
from trainwarden.agent import line_parsers as lp
from trainwarden.agent.formats import FORMATS, GENERAL, holds_numeral, read_line
from trainwarden.agent.logsource import line_item
from trainwarden.agent.pairs import Metrics
from trainwarden.agent.prefixes import strip_prefix
from trainwarden.agent.reading import MetricReader
from trainwarden.agent.tail import Line
from trainwarden.events import types as t


@pytest.mark.parametrize("line", ["loss=nan", "loss=NaN grad_norm=Infinity", "val_loss: -inf.", "loss nan.0",
                                  "{'loss': nan}", '{"loss": NaN}', "step=1", "loss: \u0663"])  # fmt: skip
def test_a_line_with_a_digit_or_a_nan_or_inf_word_passes_the_first_test(line):
    assert holds_numeral(line)


@pytest.mark.parametrize("line", ["saving checkpoint to /ckpt/last.pt", "Traceback (most recent call last):",
                                  "  warnings.warn(msg)", "loss went up", ""])  # fmt: skip
def test_a_line_without_one_is_rejected(line):
    assert not holds_numeral(line)
    assert read_line(line) == ({}, None)


def test_a_nan_line_without_a_digit_is_read_as_a_metric():
    reader = MetricReader()
    metrics, _ = reader.read("loss=nan")
    assert list(metrics) == ["loss", "step"] and metrics["loss"] != metrics["loss"]


@pytest.mark.parametrize(("text", "tag"), [("RuntimeError: CUDA out of memory.", "oom"),
                                           ("RuntimeError: NCCL error: unhandled system error", "nccl"),
                                           ("Loss is nan, stopping training", "nan"),
                                           ("RuntimeError: CUDA error: device-side assert triggered", "cuda_error"),
                                           ("Killed", "killed")])  # fmt: skip
def test_a_fault_line_without_a_digit_is_still_tagged(text, tag):
    item = line_item(run="r", host="h", line=Line(0, len(text) + 1, text), now=0.0, reader=MetricReader())
    assert item is not None and item.event.type == t.LOG_LINE and item.event.data["tag"] == tag


def _walked(line: str) -> tuple[Metrics, object]:
    """The format table walked as it was before the first test: every format, in order."""
    line = strip_prefix(line)
    stripped = line.lstrip()
    if not stripped:
        return {}, None
    for fmt in FORMATS:
        if fmt.hint in line and fmt.accepts(line, stripped):
            found = fmt.parse(line)
            if found or fmt.final:
                return found, fmt
    found = lp.general(line)
    return found, GENERAL if found else None


PIECES = [fmt.hint for fmt in FORMATS if fmt.hint] + [
    "nan", "inf", "loss", "=", "1", "0.5", " ", "it/s", "%|", "Epoch: ", "rate,", "'", '"', "x", "Test:", "*", "\t",
    "Trainable params", "(total: 3)", "all ", "{'a': 'b'}", '{"a": "b"}', "[", "]",
]  # fmt: skip


def test_reading_with_the_first_test_equals_walking_the_whole_table():
    rnd = random.Random(40)
    for _ in range(20_000):
        line = "".join(rnd.choice(PIECES) for _ in range(rnd.randint(1, 9)))
        try:
            expected = _walked(line)
        except (ValueError, OverflowError):
            expected = ({}, None)
        got = read_line(line)
        assert (repr(got[0]), got[1]) == (repr(expected[0]), expected[1]), line  # repr: NaN equals NaN

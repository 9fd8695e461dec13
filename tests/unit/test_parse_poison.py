"""No training log line makes the agent's parsers raise; an overflowing numeral is left out, a written nan kept."""

import math

from hypothesis import example, given, settings
from hypothesis import strategies as st
from trainwarden.agent.formats import parse_metrics
from trainwarden.agent.logsource import RunLog, line_item
from trainwarden.agent.tail import Line, LogTail

POISON = '{"step": 30, "loss": ' + "[" * 100_000


@settings(max_examples=400)
@given(st.text(alphabet=st.sampled_from("{}[]\"':=,. 0123456789eE+-naif|stepos/\\ITG()#>"), max_size=200))
@example(POISON)
@example('{"a":' * 5000)
@example("iter " + "9" * 5000 + ": loss 1.0")
@example("step=" + "9" * 5000 + " loss=2.0")
@example("epoch 001 | valid on 'valid' subset | loss " + "9" * 5000)
@example("{'loss': " + "9" * 5000 + "}")
@example(
    "    70/1000      6.73G      1"
    + "0" * 400
    + "     0.4706      1.084         10        640: 100%| 16/16 [00:05, 2.78it/s]"
)
@example("[rank0]:" * 5000 + "iteration 5/ 10 | lm loss: 2.5 |")
@example("Iter 1: " + ", ".join(["Train loss a b c d e f g"] * 500))
def test_no_line_makes_the_parsers_raise(line):
    assert isinstance(parse_metrics(line), dict)


def test_a_poison_line_has_no_metrics_and_the_next_line_is_read(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(POISON + '\n{"step": 31, "loss": 1.9}\n')
    items = RunLog(run="r", host="h", tail=LogTail(log)).poll(1.0)
    assert [i.event.data for i in items] == [{"step": 31, "loss": 1.9}]


def test_overflowing_numerals_are_left_out_and_written_nan_kept():
    assert parse_metrics('{"step": 1e400, "loss": NaN, "lr": 1e-4}').keys() == {"loss", "lr"}
    found = parse_metrics("step=1e400 loss=nan grad_norm=-1e999 lr=inf")
    assert found.keys() == {"loss", "lr"} and math.isnan(found["loss"]) and found["lr"] == math.inf
    assert math.isnan(parse_metrics("loss: nan, step: 5")["loss"])


def test_a_step_the_events_refuse_is_left_out_of_the_metric_event():
    item = line_item(run="r", host="h", line=Line(0, 30, "step=-1 loss=nan"), now=1.0)
    assert item is not None and item.refused
    # the refused step is left out; the event still has a position, derived (the run's first training line)
    assert item.event.data.keys() == {"loss", "step"} and item.event.data["step"] == 1
    assert line_item(run="r", host="h", line=Line(0, 30, "step=2.5"), now=1.0) is None


def test_random_bytes_are_no_metrics_and_one_stray_byte_costs_no_line():
    """Lines cut from random bytes (decoded with U+FFFD, full of control bytes) read as `s=6`, `p=4`: not text,
    so no metric; a real line with one byte that is not UTF-8 (a cp1252 dash) keeps its NaN."""
    for garbage in ("\ufffd\x03s=6\ufffd\ufffd\x10", "p=4\x02\x05\ufffd", "\x7f\ufffdK\ufffd#z=8 \ufffd\x19\ufffd"):
        assert parse_metrics(garbage) == {}, garbage
    kept = parse_metrics(b"epoch 1 \x97 step=7 loss=nan".decode("utf-8", "replace"))
    assert kept["step"] == 7 and math.isnan(kept["loss"])
    assert parse_metrics("Epoch 1/3\x08\x08\x08\x08\r 10/10 - loss: 0.25") != {}  # Keras backspaces are text

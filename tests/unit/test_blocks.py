"""Tracebacks become one log.line event; the lines around them go on."""

from pathlib import Path

from trainwarden.agent.blocks import HEAD_LINES, TAIL_LINES, TracebackGrouper
from trainwarden.agent.logsource import RunLog
from trainwarden.agent.tail import Line, LogTail

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "logs"


def lines(*texts, generation=0):
    out, pos = [], 0
    for text in texts:
        out.append(Line(pos, pos + len(text) + 1, text, generation))
        pos += len(text) + 1
    return out


def test_sample_file_tracebacks_are_one_event_each_with_the_most_specific_tag():
    log = RunLog(run="r", host="h", tail=LogTail(SAMPLES / "traceback.log"))
    items = log.poll(0.0) + log.finish(0.0)
    kinds = [("metric", i.event.data["step"]) if i.is_metric else (i.event.data["tag"], i.event.data.get("lines"))
             for i in items]  # fmt: skip
    assert kinds == [("metric", 41), ("oom", 6), ("metric", 42), ("file_not_found", 11), ("nccl", None),
                     ("killed", None)]  # fmt: skip
    chained = items[3].event.data["line"].splitlines()
    assert chained[0] == "Traceback (most recent call last):"  # the [rankN]: prefix is dropped
    assert chained[-1] == "RuntimeError: no validation data"
    assert any(line.startswith("During handling") for line in chained)


def test_a_traceback_at_the_end_of_the_log_goes_out_after_a_quiet_second(tmp_path):
    path = tmp_path / "train.log"
    path.write_text("Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'lr'\n")
    log = RunLog(run="r", host="h", tail=LogTail(path), block_idle_s=1.0)
    assert log.poll(10.0) == []
    assert log.safe_offset == 0  # a restart now would read the whole traceback again
    assert log.poll(10.5) == []
    (item,) = log.poll(11.0)
    assert item.event.data["tag"] == "traceback"
    assert item.event.seq == path.stat().st_size


def test_a_long_traceback_keeps_its_head_and_tail():
    frames = [f"  frame {i}" for i in range(1000)]
    g = TracebackGrouper()
    out = []
    for line in lines("Traceback (most recent call last):", *frames, "RecursionError: too deep", "next"):
        out += g.feed(line)
    block, single = out
    text = block.text().splitlines()
    assert len(text) == HEAD_LINES + TAIL_LINES + 1
    assert "lines omitted" in text[HEAD_LINES]
    assert text[-1] == "RecursionError: too deep"
    assert single.line.text == "next"


def test_a_new_generation_closes_an_open_block():
    g = TracebackGrouper()
    assert g.feed(lines("Traceback (most recent call last):")[0]) == []
    out = g.feed(lines("step=1 loss=1")[0].__class__(0, 14, "step=1 loss=1", 1))
    assert len(out) == 2
    assert out[0].lines[0].text.startswith("Traceback")

"""A last line without its newline: read once the writer pauses (agent.tail.SETTLE_S by the caller's clock) or
ends, never twice, and never as a wrong value; `policy backtest --log` reads such a file to its end."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

from trainwarden.agent.logsource import RunLog, settled
from trainwarden.agent.tail import LogTail


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def test_a_partial_line_is_returned_once_after_the_writer_pauses(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"step=1 loss=2.0\nstep=2 loss=nan")
    tail = LogTail(log)
    assert [(ln.text, ln.partial) for ln in tail.poll(now=0.0)] == [("step=1 loss=2.0", False)]
    assert tail.poll(now=0.5) == []  # still growing, perhaps
    assert [(ln.text, ln.partial) for ln in tail.poll(now=1.5)] == [("step=2 loss=nan", True)]
    assert tail.poll(now=5.0) == []  # returned once as it stands
    assert tail.offset == len(b"step=1 loss=2.0\n")  # a restart reads it again, from its start
    _append(log, b"\n")
    lines = tail.poll(now=6.0)
    assert [(ln.text, ln.partial, ln.start) for ln in lines] == [("step=2 loss=nan", False, 16)]
    assert tail.offset == log.stat().st_size


def test_without_a_clock_a_partial_line_waits_and_final_reads_it(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"a=1\nb=2")
    tail = LogTail(log)
    assert [ln.text for ln in tail.poll()] == ["a=1"]
    assert tail.poll() == []
    assert [(ln.text, ln.partial) for ln in tail.poll(final=True)] == [("b=2", True)]
    assert tail.poll(final=True) == []


def test_a_bar_redraw_read_early_is_not_published_again_when_the_next_redraw_ends_it(tmp_path):
    log = tmp_path / "train.log"
    bar = b"Epoch 0:  50%|#####     | 4/8 [00:01<00:01,  3.00it/s, train_loss=2.310]"
    log.write_bytes(b"\r" + bar)
    run = RunLog(run="r", host="h", tail=LogTail(log))
    assert run.poll(0.0) == []
    first = [i.event.data for i in run.poll(2.0) if i.is_metric]
    assert first == [{"epoch": 0, "step": 4, "loss": 2.31}]
    _append(log, b"\r" + bar.replace(b"4/8", b"5/8").replace(b"2.310", b"2.250"))
    assert [i.event.data for i in run.poll(3.0) if i.is_metric] == []  # the old redraw, ended by '\r': sent
    assert [i.event.data for i in run.poll(4.5) if i.is_metric] == [{"epoch": 0, "step": 5, "loss": 2.25}]


def test_a_nan_without_newline_is_seen_once_even_when_the_newline_comes_later(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"step=1 loss=2.0\nstep=2 loss=nan")
    run = RunLog(run="r", host="h", tail=LogTail(log))
    got = [i.event.data for i in run.poll(0.0) + run.poll(1.5) if i.is_metric]
    assert len(got) == 2 and got[0] == {"step": 1, "loss": 2.0}
    assert got[1]["step"] == 2 and math.isnan(got[1]["loss"])
    _append(log, b"\nstep=3 loss=1.5\n")
    assert [i.event.data for i in run.poll(2.0) if i.is_metric] == [{"step": 3, "loss": 1.5}]


def test_a_number_cut_by_the_writer_is_not_read_as_a_wrong_value(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"step=1 loss=2.0\nstep=2 loss=1")  # a block-buffered writer stopped inside `1.25`
    run = RunLog(run="r", host="h", tail=LogTail(log))
    got = [i.event.data for i in run.poll(0.0) + run.poll(1.5) if i.is_metric]
    assert got == [{"step": 1, "loss": 2.0}]
    _append(log, b".25 lr=0.1\n")
    assert [i.event.data for i in run.poll(2.0) if i.is_metric] == [{"step": 2, "loss": 1.25, "lr": 0.1}]


def test_a_partial_line_completed_with_more_values_publishes_only_those(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"step=1 loss=2.0\nstep=2 loss=nan ")
    run = RunLog(run="r", host="h", tail=LogTail(log))
    early = [i.event.data for i in run.poll(0.0) + run.poll(1.5) if i.is_metric]
    assert len(early) == 2 and math.isnan(early[1]["loss"])
    _append(log, b"grad_norm=3.5\n")
    assert [i.event.data for i in run.poll(2.0) if i.is_metric] == [{"step": 2, "grad_norm": 3.5}]


def test_the_end_of_the_run_reads_the_last_line_without_newline(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"step=1 loss=2.0\nstep=2 loss=3")
    run = RunLog(run="r", host="h", tail=LogTail(log))
    assert [i.event.data for i in run.poll(0.0) if i.is_metric] == [{"step": 1, "loss": 2.0}]
    assert [i.event.data for i in run.finish(0.1, final=True) if i.is_metric] == [{"step": 2, "loss": 3}]
    assert run.finish(0.2, final=True) == []


def test_settled_keeps_finished_values_only():
    assert settled("step=2 loss=nan") == "step=2 loss=nan"
    assert settled("step=2 loss=1") == "step=2"
    assert settled("step=2 loss: 1.2e") == "step=2"
    assert settled("Epoch 0: 50%|##| 4/8 [00:01<00:01, 3.00it/s, loss=2.3]").endswith("]")
    assert settled("{'loss': '2.5', 'epoch': '0.1") == "{'loss': '2.5',"


def test_backtest_reads_a_log_whose_last_line_has_no_newline(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"step=1 loss=2.0\nstep=2 loss=nan")  # it span at 100% CPU forever on this file
    out = subprocess.run([sys.executable, "-m", "trainwarden", "policy", "backtest", "default", "--log", str(log)],
                         check=False, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "loss-nonfinite" in out.stdout and "step 2" in out.stdout

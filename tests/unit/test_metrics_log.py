"""`trainwarden.log`: one JSON line per call that the agent's reader takes as it is, and never an exception.

Failures are real ones: a parent that is a file (NotADirectoryError), /dev/full (ENOSPC, a full disk).
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from trainwarden.agent.formats import json_line, parse_metrics
from trainwarden.core.metrics import normalise
from trainwarden.core.sidecar import METRICS_ENV
from trainwarden.sdk import log as metrics_log
from trainwarden.sdk.log import MetricsLog, writer

import trainwarden


@pytest.fixture(autouse=True)
def _alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a single process with no sidecar set, whatever the environment says."""
    for name in ("RANK", "LOCAL_RANK", METRICS_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(metrics_log._Default, "writer", None)  # trainwarden.log's writer is made afresh


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "trainwarden" and r.levelno == logging.WARNING]


def test_one_call_is_one_json_line_with_the_exact_names_and_step(tmp_path: Path) -> None:
    path = tmp_path / "run" / "train.log.metrics.jsonl"  # its folder is made
    trainwarden.init(path=path)
    trainwarden.log(step=100, loss=2.3, lr=3e-4)
    trainwarden.log({"eval/loss": 1.9, "eval/accuracy": 0.61}, step=200)
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"step": 100, "loss": 2.3, "lr": 3e-4},
        {"step": 200, "eval/loss": 1.9, "eval/accuracy": 0.61},
    ]
    assert [parse_metrics(line) for line in lines] == [json.loads(line) for line in lines]  # the agent reads it so


def test_nan_and_inf_are_kept_as_the_agent_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    MetricsLog(path).log(step=7, loss=float("nan"), grad_norm=float("inf"), scale=float("-inf"))
    read = normalise(json_line(path.read_text().strip()))
    assert read["step"] == 7
    assert math.isnan(read["loss"]) and read["grad_norm"] == math.inf and read["scale"] == -math.inf


def test_numbers_of_numpy_are_plain_numbers_and_what_is_not_a_number_is_dropped_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.jsonl"
    log = MetricsLog(path)
    log.log(step=np.int64(3), loss=np.float32(0.5), acc=np.array(0.25), note="warm-up", flag=True, hist=np.ones(3))
    log.log(step=4, loss=0.4, note="again")
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"step": 3, "loss": 0.5, "acc": 0.25},
        {"step": 4, "loss": 0.4},
    ]
    (warning,) = warnings_of(caplog)
    assert "['flag', 'hist', 'note']" in warning


def test_an_unwritable_place_drops_lines_with_one_warning_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    log = MetricsLog(blocker / "m.jsonl")
    for step in range(3):
        log.log(step=step, loss=1.0)
    (warning,) = warnings_of(caplog)
    assert "cannot write" in warning and "not-a-dir" in warning


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_disk_drops_lines_and_the_next_good_line_starts_on_its_own(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = MetricsLog("/dev/full")
    log.log(step=1, loss=1.0)  # ENOSPC
    log.log(step=2, loss=1.0)
    assert len(warnings_of(caplog)) == 1
    log.path = tmp_path / "m.jsonl"  # room again (a write that failed part-way left a torn line before it)
    log.log(step=3, loss=0.5)
    assert log.path.read_text() == '\n{"step": 3, "loss": 0.5}\n'


def test_no_path_and_no_environment_writes_nothing_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    log = writer()
    log.log(step=1, loss=1.0)
    log.log(step=2, loss=1.0)
    assert list(tmp_path.iterdir()) == []
    (warning,) = warnings_of(caplog)
    assert METRICS_ENV in warning


def test_the_launch_environment_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "train.log.metrics.jsonl"
    monkeypatch.setenv(METRICS_ENV, str(path))
    writer().log(step=5, loss=2.0)
    assert path.read_text() == '{"step": 5, "loss": 2.0}\n'


@pytest.mark.parametrize("variable", ["RANK", "LOCAL_RANK"])
def test_only_rank_zero_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    path = tmp_path / "m.jsonl"
    monkeypatch.setenv(variable, "1")
    writer(path).log(step=1, loss=1.0)
    writer().log(step=1, loss=1.0)  # not even the "no path" warning: rank 1 is silent
    assert not path.exists()
    assert warnings_of(caplog) == []
    monkeypatch.setenv(variable, "0")
    writer(path).log(step=1, loss=1.0)
    assert path.read_text() == '{"step": 1, "loss": 1.0}\n'


def test_lines_from_several_threads_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    log = MetricsLog(path)
    names = [f"metric_{i:03d}" for i in range(40)]  # long lines: an interleaving would show

    def write(thread: int) -> None:
        for step in range(200):
            log.log(dict.fromkeys(names, float(thread)), step=step)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 8 * 200
    assert all(len(set(r.values()) - {r["step"]}) <= 1 for r in rows)


def test_importing_trainwarden_loads_no_redis_rq_slack_yaml_logging_or_typing(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import trainwarden\n"
        "new = set(sys.modules) - before\n"
        "heavy = ('redis', 'rq', 'slack_sdk', 'slack_bolt', 'yaml', 'logging', 'typing', 'trainwarden.events')\n"
        "print(sorted(m for m in new if m.startswith(heavy)))\n"
        "print(sorted(m for m in new if m.startswith('trainwarden')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=True)  # fmt: skip
    heavy, ours = done.stdout.splitlines()
    assert heavy == "[]"
    assert (
        ours
        == "['trainwarden', 'trainwarden.core', 'trainwarden.core.sidecar', 'trainwarden.sdk', 'trainwarden.sdk.log']"
    )

"""Real frameworks' eval and save lines are tagged as phases by the agent (agent/phases.py): a tiny fit of each,
run in the framework venv (tests/conformance/frameworks/phase_lines.py), read as the agent reads a run's log."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from trainwarden.agent.logsource import RunLog
from trainwarden.agent.tail import LogTail
from trainwarden.events import types as t

from tests.conformance.runner import REPO

PYTHON = REPO / ".venv-frameworks" / "bin" / "python"
SCRIPT = Path(__file__).parent / "frameworks" / "phase_lines.py"
EVAL, SAVE, SAVED = ("eval", True), ("save", True), ("save", False)


@pytest.mark.parametrize(
    ("framework", "expected"),
    [
        ("lightning", [EVAL, SAVE, EVAL, SAVE]),  # `Validation:` bar; `saving model to` glued to the epoch bar
        ("keras", [SAVE, SAVED, SAVE, SAVED]),  # `Epoch 1: saving model to`, `Epoch 1: finished saving model to`
        ("hf", [EVAL, SAVE, EVAL, SAVE]),  # `***** Running Evaluation *****`, `Saving model checkpoint to`
    ],
)
def test_a_frameworks_own_eval_and_save_lines_are_phases(framework: str, expected: list, tmp_path: Path):
    if not PYTHON.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{PYTHON} is missing: ./dev.sh frameworks installs it")
        pytest.skip(f"{PYTHON} is missing (./dev.sh frameworks installs it)")
    log = tmp_path / "train.log"
    with log.open("wb") as out:
        done = subprocess.run([str(PYTHON), str(SCRIPT), framework, str(tmp_path / "out")], stdout=out,
                              stderr=subprocess.STDOUT, cwd=tmp_path, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, log.read_text(errors="replace")[-2000:]
    reader = RunLog(run="r", host="h", tail=LogTail(log))
    items = reader.poll(1.0) + reader.finish(2.0, final=True)
    assert [(i.event.data["phase"], i.event.data["started"]) for i in items if i.event.type == t.PHASE] == expected

"""Hugging Face Trainer's `trainer_state.json`, followed as the trainer saves checkpoints.

The Trainer keeps every logging call in `log_history` and writes the whole state at each checkpoint
(`checkpoint-<step>/trainer_state.json`) and at the end (`<output_dir>/trainer_state.json`):

    {"epoch": 0.06, "learning_rate": 4.6e-07, "loss": 0.8917, "step": 25}
    {"epoch": 3.0, "eval_loss": 0.389, "eval_runtime": 3.0155, ..., "step": 375}
    {"epoch": 3.0, "step": 375, "total_flos": ..., "train_loss": 0.47, "train_runtime": 141.3, ...}

Each entry is one record with its `step`, numbered by its place in `log_history` (entry i is seq
i + 1, the same in every checkpoint's copy). The end-of-run summary (the entry with
`train_runtime`, whose `train_loss` is the average over the run) is not a step metric and is left
out. The newest of the watched file and the `checkpoint-*/<name>` files beside it is read; a file
caught mid-write is read again on the next poll. The run's plan (`max_steps`, `num_train_epochs` at the state's
top: core/plan.py) goes with the first record each read returns.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trainwarden.agent import access
from trainwarden.agent.structured import Record, whole_step
from trainwarden.core.plan import from_config

SUMMARY_KEYS = ("train_runtime",)  # only the end-of-run summary has these


def history_records(state: Any, *, start: int = 0) -> list[Record]:
    """Pure: the step metrics of a parsed trainer state, from `log_history` entry `start` on."""
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        return []
    out: list[Record] = []
    for i in range(start, len(history)):
        entry = history[i]
        if not isinstance(entry, dict) or any(key in entry for key in SUMMARY_KEYS):
            continue
        metrics = {k: v for k, v in entry.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        if any(k not in ("step", "epoch") for k in metrics):
            if not out:
                metrics |= from_config(state)  # the plan: once per read (a fold of the same values is no change)
            out.append(Record("hfstate", "", i + 1, i, metrics, whole_step(metrics.get("step"))))
    return out


def entries(state: Any) -> int:
    history = state.get("log_history") if isinstance(state, dict) else None
    return len(history) if isinstance(history, list) else 0


class TrainerState:
    """Incremental reader of a run's `trainer_state.json`; `offset` is the number of entries read."""

    def __init__(self, path: Path, *, offset: int = 0, generation: int = 0, inode: int | None = None) -> None:
        self.path = Path(path)
        self.offset = offset
        self.generation = generation
        self.inode = inode
        self._seen: tuple[Path, int, int] | None = None  # the file last read: path, mtime, size

    @property
    def exists(self) -> bool:
        return self._seen is not None or access.exists(self.path)  # asked every poll: no directory listing

    def _newest(self) -> tuple[Path, os.stat_result] | None:
        best: tuple[Path, os.stat_result] | None = None
        for path in [self.path, *self.path.parent.glob(f"checkpoint-*/{self.path.name}")]:
            try:
                st = path.stat()
            except OSError:
                continue
            if best is None or st.st_mtime_ns > best[1].st_mtime_ns:
                best = (path, st)
        return best

    @property
    def progress(self) -> int:
        return self.offset

    def poll(self) -> list[Record]:
        newest = self._newest()
        if newest is None:
            return []
        path, st = newest
        key = (path, st.st_mtime_ns, st.st_size)
        if key == self._seen:
            return []
        try:
            state = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return []  # caught mid-write (the Trainer writes in place): read it again next time
        self._seen = key
        records = history_records(state, start=self.offset)
        self.offset = max(self.offset, entries(state))
        return records

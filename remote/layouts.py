"""What the common trainers write into a checkpoint directory, and where each records its best (pure).

- Hugging Face Trainer: one DIRECTORY per save, `checkpoint-<global step>/`, each holding a
  `trainer_state.json` whose `best_model_checkpoint` names the best directory (set when
  `metric_for_best_model` or `load_best_model_at_end` is); HF's own `save_total_limit` keeps exactly
  that best and the newest, which is what retention keeps too.
- Lightning's ModelCheckpoint: `epoch=3-step=40.ckpt` by default, `epoch=3-step=40-val_loss=0.12.ckpt`
  when its `filename` names the monitored metric, `last.ckpt` with `save_last` (a symlink to the newest with
  `save_last="link"`). The best is `best_model_path` in the callback's state, which every `.ckpt` pickles:
  read here from the raw pickle bytes (torch.save stores `data.pkl` uncompressed, first in its zip) so the
  remote needs no torch.
- ultralytics (docs.ultralytics.com/modes/train, "save_period"; ultralytics/engine/trainer.py `save_model`):
  `weights/best.pt`, `weights/last.pt` and, with `save_period=N`, `weights/epoch<N>.pt`; the names say it all.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import PurePosixPath

EPOCH_RE = re.compile(r"(?i)(?<![a-z])(?:epoch|ep)[_=-]?(\d+)")
STEP_RE = re.compile(r"(?i)(?<![a-z])(?:step|iter|it)[_=-]?(\d+)")
HF_DIR_RE = re.compile(r"^checkpoint-(\d+)$")  # HF Trainer's PREFIX_CHECKPOINT_DIR + global step
KEPT_BY_NAME_RE = re.compile(r"(?i)best|(?:^|[_.=-])(?:latest|last)(?:[_.=-]|$)")
HF_STATE = "trainer_state.json"
STATE_CAP_BYTES = 8 << 20  # trainer_state.json carries the log history: long runs write megabytes
LIGHTNING_KEY = b"best_model_path"


@dataclass(frozen=True, slots=True)
class RecordedBest:
    """The best checkpoint as the run's own record names it, or why the record named none."""

    name: str | None  # an entry of the checkpoint dir
    source: str  # where it was read, for the dry run
    note: str | None = None
    readable: bool = True  # False: the record exists but could not be read, so retention deletes nothing


def parse_name(name: str, best_metric: str | None) -> tuple[int | None, int | None, float | None]:
    """(epoch, step, metric) read from a name like `epoch_25_val_loss=2.31.pt` or HF's `checkpoint-500`."""
    epoch = int(m.group(1)) if (m := EPOCH_RE.search(name)) else None
    step = int(m.group(1)) if (m := STEP_RE.search(name) or HF_DIR_RE.match(name)) else None
    metric = None
    if best_metric:
        pattern = re.escape(best_metric) + r"[_=-]?([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
        if m := re.search(pattern, name):
            metric = float(m.group(1))
    return epoch, step, metric


def kept_by_name(name: str) -> bool:
    """Named best, latest or last (`best.pt`, `last.ckpt`, `model_best.pth.tar`): the names labs keep by."""
    return bool(KEPT_BY_NAME_RE.search(name))


def is_hf_dir(name: str) -> bool:
    return bool(HF_DIR_RE.match(name))


def hf_best(text: str, source: str) -> RecordedBest:
    """`best_model_checkpoint` of a trainer_state.json; bad JSON is a note, never a guess."""
    try:
        state = json.loads(text)
    except ValueError as e:
        return RecordedBest(None, source, f"{source} is not JSON ({e}): nothing deleted", readable=False)
    best = state.get("best_model_checkpoint") if isinstance(state, dict) else None
    if not isinstance(best, str) or not best:
        return RecordedBest(None, source, f"{source} records no best_model_checkpoint "
                                          "(the Trainer sets it with metric_for_best_model)")  # fmt: skip
    return RecordedBest(PurePosixPath(best).name, f"{source} best_model_checkpoint")


def lightning_best(chunk: bytes, source: str) -> RecordedBest:
    """`best_model_path` from the pickle bytes that start at its key (protocol 2 to 5 string opcodes)."""
    if not chunk.startswith(LIGHTNING_KEY):
        return RecordedBest(None, source, f"{source} holds no ModelCheckpoint state (best_model_path)")
    i = len(LIGHTNING_KEY)
    skip = {0x71: 1, 0x72: 4, 0x94: 0}  # BINPUT, LONG_BINPUT, MEMOIZE: the pickler's memo after the key
    while i < len(chunk) and chunk[i] in skip:
        i += 1 + skip[chunk[i]]
    heads = {0x58: ("<I", 4), 0x8C: ("<B", 1), 0x8D: ("<Q", 8)}  # BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
    if i >= len(chunk) or chunk[i] not in heads:
        return RecordedBest(None, source, f"{source}: best_model_path is not a plain string", readable=False)
    fmt, width = heads[chunk[i]]
    start = i + 1 + width
    if start > len(chunk):
        return RecordedBest(None, source, f"{source}: best_model_path cut short", readable=False)
    (length,) = struct.unpack(fmt, chunk[i + 1 : start])
    raw = chunk[start : start + length]
    if len(raw) != length:
        return RecordedBest(None, source, f"{source}: best_model_path cut short", readable=False)
    if not raw:
        return RecordedBest(None, source, f"{source} records no best (best_model_path is empty: no monitor?)")
    return RecordedBest(PurePosixPath(raw.decode("utf-8", "replace")).name, f"{source} best_model_path")

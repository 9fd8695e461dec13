"""Pure: what a log line says of the run's planned length and task size (core/plan.py), as trainers print it.

- the epoch count: `Epoch [3/10]`, `Epoch 3/10` (Keras, AllenNLP, the PyTorch tutorials), `Epoch: [3/10]`;
  Hugging Face Trainer's `Num Epochs = 3` (log_level info), `num_train_epochs=3` in a printed config.
  Lightning's `Epoch 0/-2` (a run bounded by max_steps) says none.
- the step count: `max_steps=5000` / `max_steps: 5000` (not `-1`: unset), the HF Trainer's `Total
  optimization steps = 500`, and the total of a training bar without an epoch and with an empty or training
  description (`  4%|▍   | 20/500 [00:05<02:10, ...]`, the HF Trainer's at its default log level); a bar of
  one epoch (`Epoch 3: ... 1/8`), an eval bar or a `datasets` map bar counts batches of something else.
  The largest such total is kept (an HF eval bar has no description either, and is shorter).
- the class count: `num_classes: 10`, `n_classes=10`, `num_labels=2`, `Number of classes: 10`.
"""

from __future__ import annotations

import re

from trainwarden.agent.bars import BAR_RE, EPOCH_RE, is_bar, is_eval_bar
from trainwarden.core.plan import NUM_CLASSES, TOTAL_EPOCHS, TOTAL_STEPS

EPOCH_OF_RE = re.compile(r"\bEpoch\s*:?\s*\[?\s*\d+\s*/\s*(\d+)\s*\]?(?![\d.])", re.IGNORECASE)
EPOCHS_RE = re.compile(r"\b(?:Num Epochs\s*=|num_train_epochs\s*[=:])\s*(\d+)(?:\.0)?(?![\d.])", re.IGNORECASE)
STEPS_RE = re.compile(r"\b(?:Total optimization steps\s*=|max_steps\s*[=:])\s*(\d[\d,]*)(?![\d.])", re.IGNORECASE)
CLASSES_RE = re.compile(
    r"\b(?:num_classes|n_classes|nb_classes|num_labels|number of classes)\s*[=:]\s*(\d+)(?![\d.])", re.IGNORECASE
)
# a training bar's description: none (the HF Trainer's), or one that says training
TRAIN_BAR_DESC_RE = re.compile(r"^[\s\r]*(?:(?:train(?:ing)?|steps?|iterations?)\b[^|]*)?$", re.IGNORECASE)
_WORDS = ("epoch", "num_train", "max_steps", "total optimization", "class", "num_labels", "it/s", "s/it")


def planned(line: str) -> dict[str, int]:
    """The plan facts `line` states (empty for almost every line: a cheap test first)."""
    lowered = line.lower()
    if not any(w in lowered for w in _WORDS):
        return {}
    out: dict[str, int] = {}
    if (found := EPOCH_OF_RE.search(line) or EPOCHS_RE.search(line)) is not None:
        out[TOTAL_EPOCHS] = int(found.group(1))
    if (found := STEPS_RE.search(line)) is not None:
        out[TOTAL_STEPS] = int(found.group(1).replace(",", ""))
    elif is_bar(line) and (total := _training_bar_total(line)) is not None:
        out[TOTAL_STEPS] = total
    if (found := CLASSES_RE.search(line)) is not None:
        out[NUM_CLASSES] = int(found.group(1))
    return {k: v for k, v in out.items() if v > 0}


def _training_bar_total(line: str) -> int | None:
    """The total of a tqdm bar over the whole training run (see the module docstring), or None."""
    found = None
    for found in BAR_RE.finditer(line):  # noqa: B007 - the last match is the newest redraw
        pass
    if found is None:
        return None
    head = line[: found.start()].rsplit("\r", 1)[-1]
    desc = head.split("|")[0].rstrip(" 0123456789%:")
    if EPOCH_RE.search(head) or is_eval_bar(head) or not TRAIN_BAR_DESC_RE.match(desc):
        return None
    return int(found.group(2))

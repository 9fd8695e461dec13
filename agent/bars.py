"""Pure: progress bars, read for what they hold. A bar is redrawn many times a second and each redraw repeats
the values of the last one, so besides reading a redraw this module decides which of its values are new
(`fresh`): the per-run state it needs is held by the run's `agent.reading.MetricReader`.

- tqdm, Lightning's `TQDMProgressBar`:
  `Epoch 2:  12%|█▎        | 1/8 [00:00<00:00, 406.35it/s, train_loss=2.660, val_loss=3.090]`
- Lightning's `RichProgressBar`: `Epoch 2/2  ━━━━━━━━━━━━━━━━━━━━ 8/8 0:00:00 • 0:00:00 432.22it/s train_loss: 2.334`
- an evaluation bar (no metrics; it says an eval ran):
  `Validation DataLoader 0: 100%|██████████| 8/8 [00:00<00:00, 799.37it/s]`
"""

from __future__ import annotations

import math
import re

from trainwarden.agent.pairs import Metrics, colon, key_value
from trainwarden.core.metrics import role

# tqdm / Lightning: `450/1000 [00:30<00:36, 15.00it/s, key=value, ...]`, optionally `Epoch 3:` before.
BAR_RE = re.compile(r"(\d+)/(\d+)\s*\[[^\]]*?(?:([\d.]+)(it/s|s/it))?(?:,\s*([^\]]*))?\]")
EPOCH_RE = re.compile(r"\bEpoch\s+(\d+)\b")
# Rich (Lightning's RichProgressBar): `Epoch 2/2  ━━━━ 8/8 0:00:00 • 0:00:00 432.22it/s train_loss: 2.334`;
# `Epoch 0/-2` when the run is bounded by max_steps, not epochs
RICH_RE = re.compile(
    r"^\s*(?:Epoch (\d+)/-?\d+|[\w ]*?)\s+[━╸╺╾╼\s]*\s(\d+)/(\d+|\?)\s+[\d:-]+\s+•\s+[\d:-]+\s+"
    r"(?:[\d.]+(?:it/s|s/it))?(.*)$"
)
# a tqdm bar of any unit (`datasets`' `Map:  50%|█████     | 500/1000 [00:00<00:00, 5000.00 examples/s]`,
# `Tokenizing train dataset:  16%|...`, `12.3ba/s`, `MB/s`): a percentage, the bar, `n/total [`
TQDM_SHAPE_RE = re.compile(r"\d%\|[^|]*\|\s*\d+/\d+\s*\[")
# a bar over held-out data: its end means an eval ran, even when the metric it yields equals the last one
EVAL_BAR_RE = re.compile(r"^\s*(?:Validation|Validating|Evaluating|Evaluation|Eval|Testing|Test)\b", re.IGNORECASE)


def is_bar(line: str) -> bool:
    return "it/s" in line or "s/it" in line


def tqdm_shaped(line: str) -> bool:
    """A tqdm bar whatever its unit: its postfix is read as a bar's (none in a `datasets` map bar, whose
    description and percentage were read as a metric `tokenizing_train_dataset` or `map`)."""
    return "%|" in line and TQDM_SHAPE_RE.search(line) is not None


def progress_bar(line: str) -> Metrics:
    """The last redraw of a tqdm or Lightning bar in the line; metrics from its postfix. A bar of an epoch is
    at `epoch`, and at `step` = batches so far (epoch x total + position) when it prints no step itself; a bar
    without an epoch is at its position."""
    found = None
    for found in BAR_RE.finditer(line):  # noqa: B007 - the last match is the newest redraw
        pass
    if found is None:
        return {}
    out: Metrics = {}
    postfix = found.group(5)
    if postfix:
        out.update(key_value(postfix))
    if not out:
        return {}  # a bar without metrics (just progress and rate) says nothing about training
    return _placed(out, EPOCH_RE.search(line[: found.start()]), int(found.group(1)), int(found.group(2)))


def rich_bar(line: str) -> Metrics:
    """Lightning's Rich bar: `key: value` pairs after the rate; its epoch as in `Epoch 2/2`."""
    found = RICH_RE.match(line)
    if found is None:
        return {}
    out = colon(found.group(4))
    if not out:
        return {}
    total = found.group(3)
    epoch = found.group(1)
    return _placed(out, epoch, int(found.group(2)), int(total) if total.isdigit() else 0)


def _placed(out: Metrics, epoch: re.Match[str] | str | None, n: int, total: int) -> Metrics:
    names = {k.lower() for k in out}
    printed_step = not names.isdisjoint(("step", "global_step", "iter", "iteration", "num_updates"))
    if epoch is None:
        return out if printed_step else {"step": n, **out}
    e = int(epoch if isinstance(epoch, str) else epoch.group(1))
    place: Metrics = {"epoch": e}
    if not printed_step and total:
        place["step"] = e * total + n
    return {**place, **out}


def is_eval_bar(line: str) -> bool:
    return EVAL_BAR_RE.match(line) is not None


def fresh(metrics: Metrics, carried: dict[str, float | int], *, eval_ran: bool, positions: frozenset[str]) -> Metrics:
    """The values of one bar redraw that are new samples: those that changed since the last redraw (`carried`,
    updated here), and an eval's values when an eval bar ran since (an eval that scored the same is still an
    eval). A value carried unchanged is a redraw, not a sample. Positions always stay.

    A training value that stays NaN or Inf while the bar moves on is a sample at each new position: a loop that
    calls `set_postfix(noise_step_loss=...)` every step prints `nan` again step after step, and counted once, a
    rule that wants the non-finite term on 2 logged steps (`loss-term-nonfinite`) never saw it twice."""
    out: Metrics = {}
    moved = any(name in positions and carried.get(name, value) != value for name, value in metrics.items())
    for name, value in metrics.items():
        before = carried.get(name)
        carried[name] = value
        new = before is None or not same_value(before, value) or (eval_ran and role(name) != "train")
        new = new or (moved and not math.isfinite(value) and role(name) == "train")
        if new or name in positions:
            out[name] = value
    return out


def same_value(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN: one value read twice (a redraw, a line read in two parts) is one sample."""
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))

"""One run's metric lines read in order: which numbers are metrics, and where in the run each line is.

`agent.formats` reads one line at a time and finds every `name value` pair in it; whether those numbers
are a training step's metrics depends on the lines around it, so a `MetricReader` is held per run log:

* **Not every number is a metric.** A line's numbers become a `metric` event when one of its names is a
  measurement the vocabulary knows (`events.metrics.is_known`: `loss`, `val_acc`, `total_loss`, not
  `lr` or `steps` alone), or when its set of names recurs with new values (seen on at least two lines:
  `scale: 65536` printed at every loss-scale change). Start-up banners and configs (`steps=2000`,
  `vocab_size: 32000`, `Namespace(lr=0.1, ...)`, `eval_steps=500`) are read once and dropped; the first
  line of a shape known by recurrence only is dropped too (the reader cannot know yet). A source file and
  line (`trainer.py:2128`, `ProcessGroupNCCL.cpp:1664`) and a word of a sentence (`setting loss scale
  to: 64.0`) are never metric names. The Hugging Face end-of-run summary (`{'train_runtime': ...,
  'train_loss': <mean over the run>, 'epoch': 3.0}`) is kept under `summary/<printed name>`, so it is shown
  but no loss rule reads its average as a step's loss.
* **Always a position.** Every event carries an int `step`: the trainer's own when it prints one; else the
  epoch of a line above naming only the epoch (Keras `Epoch N/M`, nnU-Net `Epoch N`; also set as `epoch`);
  else, once the run has printed steps, the last of them; else the line's whole `epoch` (one line per epoch);
  else a count of training lines (Hugging Face dict lines), an evaluation line or a summary taking the position of the
  training line before it (0 before any). A step printed with an epoch that starts again from low when the
  epoch goes up counts batches within the epoch (`Epoch [2/5], Step [100/600]`): the steps of the epochs
  before are added, so no sample is placed before an earlier one. A line repeating the previous one (a
  redrawn bar, a doubled line) keeps its position. A line with two counters (`iter 40 | step 10`: iterations
  and optimizer steps under gradient accumulation) is at the finer one, the coarser kept as `optimizer_step`.
  A count never goes backwards; a trainer's own step or epoch may (a resumed run).
* **A setting is no sample.** A name outside the vocabulary (`events.metrics`: not `loss`, `lr`, `val_acc`,
  ...) that keeps its first value on more than `CONSTANT_AFTER` lines (`local_rank: 0`, `vocab_size: 32000`,
  `bsz=64` beside the loss) is left out of the events from then on, until it changes: no rule judges it.
* **A table is read whole.** A box of `| name | value |` rows (stable-baselines3, OpenAI baselines) is one
  sample at its closing rule; a row of numbers under a header of names (fastai) is one sample
  (`agent.tables`). Only lines no one-line format read are offered to it.
* **A redraw is no sample.** A progress bar's values (formats marked `redrawn`) count only when they change
  since the bar's last redraw, or, for an eval's values, when an eval bar ran since (`agent.bars.fresh`): the
  `val_loss` a Lightning bar carries through the next epoch is one eval, not one per redraw.

Pure (no I/O) and bounded: a few numbers, the last values of a bar and at most `MAX_SHAPES` remembered name sets.
"""

from __future__ import annotations

import re
from functools import lru_cache

from trainwarden.agent import bars
from trainwarden.agent.formats import Metrics, binary, read_line
from trainwarden.agent.pairs import PROSE
from trainwarden.agent.plan_lines import planned
from trainwarden.agent.prefixes import strip_prefix
from trainwarden.agent.tables import Tables
from trainwarden.core.metrics import BY_NAME, is_known, normalise, quality, role, without_problems

MAX_SHAPES = 256  # name sets remembered for recurrence; the oldest is forgotten first
CONSTANT_AFTER = 5  # lines a name outside the vocabulary keeps its first value before it is read as a setting
MAX_CONSTANTS = 1024  # names watched for that; past this, new names are not watched
_CHANGED = object()
SUMMARY = "summary/"
# Hugging Face Trainer's end-of-run `speed_metrics("train", ...)` and `total_flos`: names no step line has
SUMMARY_NAMES = frozenset({"train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos"})
# a line that only names the epoch: Keras `Epoch 3/10`, nnU-Net `Epoch 3`, AllenNLP `Epoch 5/19`
EPOCH_HEADER_RE = re.compile(r"(?:^|\s)Epoch\s+(\d+)(?:/(\d+))?\s*$")
SOURCE_FILE_RE = re.compile(r"\.(?:py|pyx|c|cc|cpp|cxx|cu|cuh|h|hpp|rs|go|java)$", re.IGNORECASE)
CONFIG_REPR_RE = re.compile(r"\b[A-Z]\w*\(\s*\w+=")  # `Namespace(lr=...`, `TrainConfig(steps=...`
POSITION = frozenset({"step", "epoch"})
# a second counter printed beside the step (kept under its printed name by `normalise`): iterations and optimizer
# steps differ under gradient accumulation (`iter 40 | step 10`)
COUNTERS = frozenset({"iter", "iteration", "global_step", "num_updates", "micro_step", "microstep", "updates"})


def _finest(metrics: Metrics) -> float | int:
    """The finest counter of a line with two: it is the step (samples are ordered by it); the other count, when
    coarser, is kept as `optimizer_step`."""
    step = metrics["step"]
    for name in COUNTERS & metrics.keys():
        value = metrics[name]
        if type(value) is int and type(step) is int and value > step:
            del metrics[name]
            metrics["optimizer_step"], step = step, value
    return step


_RECURS = object()


@lru_cache(maxsize=1024)
def _settings_in(names: tuple[str, ...]) -> tuple[str, ...]:
    """The names of a line (canonical) that may be settings: outside the vocabulary, not a known measurement, an
    eval or test metric, nor a primary-metric family (`metrics/mAP50(B)`). Worked out once per shape."""
    return tuple(n for n in names if n not in POSITION and n not in BY_NAME and not is_known(n)
                 and role(n) == "train" and quality(n) is None)  # fmt: skip


@lru_cache(maxsize=1024)
def _printed_shape(printed: tuple[str, ...]) -> tuple[bool, frozenset[str]]:
    """Whether a line of these printed names is the end-of-run summary, and which of the names are a source file
    and line (`trainer.py:2128`) or a word of a sentence (`to: 64.0`). Trainers print the same shapes line
    after line, so each is worked out once."""
    summary = not SUMMARY_NAMES.isdisjoint(printed)
    return summary, frozenset(n for n in printed if n.lower() in PROSE or SOURCE_FILE_RE.search(n) is not None)


@lru_cache(maxsize=1024)
def _canonical_shape(names: tuple[str, ...]) -> tuple[bool, bool]:
    """Whether a line of these canonical names has a known measurement, and whether it is an evaluation only."""
    return any(map(is_known, names)), all(n.startswith("val_") for n in names if n not in POSITION)


class MetricReader:
    """What one run's log lines hold as metrics, each with a position (see the module docstring)."""

    def __init__(self) -> None:
        self.last_step: int | None = None  # the position of the last metric line
        self.printed_steps = False  # the trainer prints its steps: a line without one takes the last
        self.header_epoch: int | None = None  # from the last line naming only the epoch (`Epoch N/M`, `Epoch N`)
        self._last_values: Metrics | None = None  # the previous metric line, before positioning ...
        self._last_out: Metrics = {}  # ... and after
        self._shapes: dict[frozenset[str], object] = {}  # name set -> first values, or _RECURS
        self._carried: dict[str, float | int] = {}  # a progress bar's values at its last redraw (agent.bars.fresh)
        self._eval_ran = False  # an eval bar ran since: the next redraw's validation values are a new eval
        self._printed: int | None = None  # the last step printed, and the epoch printed with it
        self._printed_epoch: object = None
        self._step_base = 0  # the steps of the epochs before, for a step counted within each epoch
        self._constant: dict[str, object] = {}  # name -> [first value, lines seen with it], or _CHANGED
        self._tables = Tables()  # metrics printed over several lines (agent.tables)
        self.plan: dict[str, int] = {}  # the run's planned length and class count as its lines said them
        self._plan_news: dict[str, int] = {}  # ... not yet sent: they go with the next metric event

    def read(self, text: str, *, again: bool = False) -> tuple[Metrics, list[str]]:
        """The metrics of one line (empty when none) and the problems of values left out of them; with them, once,
        what the run's lines said of its plan since the last metric event (`agent.plan_lines`, core/plan.py)."""
        said = planned(text)
        for key, stated in said.items():
            # an eval bar's total is shorter than the training bar's: the longest is the run's
            value = max(stated, self.plan.get(key, 0)) if key == "total_steps" else stated
            if self.plan.get(key) != value:
                self.plan[key] = self._plan_news[key] = value
        metrics, refused = self._read(text, again=again)
        if metrics and self._plan_news:
            metrics = {**metrics, **self._plan_news}
            self._plan_news = {}
        return metrics, refused

    def _read(self, text: str, *, again: bool = False) -> tuple[Metrics, list[str]]:
        """The metrics of one line (empty when none) and the problems of values left out of them; `again`: the
        line completes the one read before (a partial line read early, agent.tail), so it keeps its position."""
        if binary(text):
            return {}, []  # random bytes, not text: no metric, and no table row either
        header = EPOCH_HEADER_RE.search(text) if "Epoch" in text else None
        if header is not None:
            self.header_epoch = int(header.group(1))
            self._last_values = None  # a new epoch: the next fit line is not a redraw of the last one
            return {}, []
        printed, fmt = read_line(text)
        if not printed:
            if fmt is not None and fmt.redrawn and bars.is_eval_bar(text):
                self._eval_ran = True
            if fmt is not None or not (printed := self._tables.read(strip_prefix(text))):
                return {}, []
        summary, drop = _printed_shape(tuple(printed))
        if summary:
            metrics = {k if k == "epoch" else SUMMARY + k: v for k, v in printed.items()}
        else:
            if "(" in text and CONFIG_REPR_RE.search(text):
                return {}, []
            metrics = normalise({k: v for k, v in printed.items() if k not in drop} if drop else printed)
        metrics, refused = without_problems(metrics)
        if not metrics:
            return {}, refused
        known, follows = _canonical_shape(tuple(metrics))
        if not (summary or known or self._recurs(metrics)):
            return {}, refused
        if not self._settings_dropped(metrics):
            return {}, refused  # nothing but settings printed again (`local_rank: 0`, `vocab_size: 32000`)
        if fmt is not None and fmt.redrawn:
            metrics = bars.fresh(metrics, self._carried, eval_ran=self._eval_ran, positions=POSITION)
            if self._eval_ran and any(k.startswith("val_") for k in metrics):
                self._eval_ran = False
            if not set(metrics) - POSITION:
                return {}, refused  # a redraw that repeats the last values: no new sample
        return self._positioned(metrics, summary or follows, again), refused

    def _settings_dropped(self, metrics: Metrics) -> bool:
        """Leave out of `metrics` the names outside the vocabulary whose value has not changed since their first
        line, once seen on more than `CONSTANT_AFTER` lines: a setting printed beside the metrics (`local_rank`,
        `vocab_size`, `num_layers`, `bsz`), never a training signal. A name in the vocabulary (`loss`, `lr`,
        `val_acc`, `loss_scale`, an eval metric, `metrics/mAP50(B)`) always stays: a loss that does not move is
        what a rule looks for. Whether anything but a position is left."""
        names = _settings_in(tuple(metrics))
        if not names:
            return True  # the usual line: only the vocabulary's names (and a position)
        watched = self._constant
        for name in names:
            seen = watched.get(name)
            if seen is _CHANGED:
                continue
            value = metrics[name]
            if seen is None:
                if len(watched) < MAX_CONSTANTS:
                    watched[name] = [value, 1]
            elif not isinstance(seen, list) or not bars.same_value(seen[0], value):
                watched[name] = _CHANGED
            else:
                seen[1] += 1
                if seen[1] > CONSTANT_AFTER:
                    del metrics[name]
        return any(n not in POSITION for n in metrics)

    def _recurs(self, metrics: Metrics) -> bool:
        shape = frozenset(metrics)
        seen = self._shapes.get(shape)
        if seen is _RECURS:
            return True
        if seen is not None and seen != metrics:  # the same names again, with new values: a metric line
            self._shapes[shape] = _RECURS
            return True
        if seen is None:
            if len(self._shapes) >= MAX_SHAPES:
                del self._shapes[next(iter(self._shapes))]
            self._shapes[shape] = metrics
        return False  # first seen, or an exact repeat (each rank printing one banner)

    def _positioned(self, metrics: Metrics, follows: bool, again: bool = False) -> Metrics:
        """`metrics` (the reader's own dict) with its position; `follows`: at the training line before it."""
        if metrics == self._last_values:
            return dict(self._last_out)  # a repeated line (a redraw, a doubled line): the same position
        self._last_values = dict(metrics)
        if again and self.last_step is not None and "step" not in metrics:
            metrics["step"] = self.last_step  # the rest of a line read before: where that part was
            self._last_out = metrics
            return metrics
        step = metrics.get("step")
        if step is not None and not COUNTERS.isdisjoint(metrics):
            step = _finest(metrics)
        if step is not None:
            step = self._counted_on(int(step), metrics.get("epoch"))  # whole by `without_problems` (`32000.0`)
            self.printed_steps = True
        elif self.header_epoch is not None and "epoch" not in metrics:
            metrics["epoch"] = step = self.header_epoch
        elif self.printed_steps and self.last_step is not None:
            step = self.last_step
        elif type(metrics.get("epoch")) is int:
            step = int(metrics["epoch"])
        else:
            last = self.last_step
            step = (last if follows else last + 1) if last is not None else (0 if follows else 1)
        self.last_step = metrics["step"] = step
        self._last_out = metrics
        return metrics

    def _counted_on(self, step: int, epoch: object) -> int:
        """A printed step as a position in the run: a step that starts again from low when the epoch goes up
        counts batches within an epoch (`Epoch [2/5], Step [100/600]`), so the steps of the epochs before are
        added (never a sample placed before an earlier one); a step going back in the same epoch is the
        trainer's own (a resumed run) and stays as printed."""
        if not isinstance(epoch, int | float):
            return step  # no epoch beside it: the trainer's own count
        last, before = self._printed, self._printed_epoch
        if isinstance(before, int | float) and epoch < before:
            self._step_base = 0  # an earlier epoch again: a resumed run, counted from its own steps
        elif last is not None and step < last and isinstance(before, int | float) and epoch > before:
            self._step_base += last
        self._printed, self._printed_epoch = step, epoch
        return self._step_base + step

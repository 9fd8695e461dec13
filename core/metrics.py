"""The one vocabulary of metric names, shared by the agent (printed name -> canonical) and the policies
(canonical name -> every spelling to look for).

Trainers and loggers print one quantity under many names (`train/loss`, `eval_loss`, `learning_rate`).
The agent maps what it reads to canonical names before publishing (`canonical`, `normalise`); a policy
rule names the canonical metric and also matches the spellings listed here (`spellings`), for events that
did not go through the agent's mapping (hand-written events, older logs). Both directions read the one
table below, so they cannot drift apart.

Validation and training metrics are different metrics, never aliases of each other: `val_ppl` is
perplexity on held-out data and a rising `val_ppl` may stop a run early; `ppl` (`perplexity`,
`train/ppl`) is training perplexity. Likewise `loss` and `val_loss`. The unit test of this table checks
that no spelling belongs to two metrics and that the agent maps every spelling to its own metric.

The agent's rule for a printed name, after exact spellings:
1. lower-case; ` `, `-` and `.` become `_`, `/` stays a separator;
2. a phase prefix is split off: `train/`, `train_`, `training/`, `training_` (training: dropped) and
   `eval/`, `eval_`, `val/`, `val_`, `valid/`, `valid_`, `validation/`, `validation_` (validation:
   becomes `val_`);
3. the rest goes through the training metrics' unprefixed spellings (`learning_rate` -> `lr`,
   `perplexity` -> `ppl`, `num_updates` -> `step`) and the prefix goes back on (`eval/perplexity` ->
   `val_ppl`, `eval_runtime` -> `val_runtime`); a second validation prefix is dropped (`valid_valid_ppl`
   -> `val_ppl`).
Any other name is kept (lower-cased). When two printed names of one line map to one canonical name, the
first keeps it and the second keeps its printed name.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from trainwarden.core.limits import MAX_NAME_CHARS, name_problem, names_fit


class Phase(Enum):
    TRAINING = "training"  # measured on training batches (or counting training progress)
    VALIDATION = "validation"  # measured on held-out data; the early-stopping metrics
    SYSTEM = "system"  # the GPU or the process, from the agent's own probes (not from the log)


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    phase: Phase
    spellings: tuple[str, ...]  # printed names besides `name`, in the order a policy looks for them
    meaning: str


TRAINING, VALIDATION, SYSTEM = Phase.TRAINING, Phase.VALIDATION, Phase.SYSTEM
# A rule looks every spelling up in every event: list the ones trainers print, not every combination of
# prefix and name (the agent's rule below maps `validation/perplexity` and the like to `val_ppl` anyway).
METRICS: tuple[Metric, ...] = (
    Metric("loss", TRAINING, ("train/loss", "train_loss", "train.loss", "training_loss", "lm loss", "total_loss",
                              "logloss", "binary_logloss", "multi_logloss", "mlogloss", "avr_loss", "err"),
           "training loss (a gradient-boosting log's logloss too: `eval-logloss` is then `val_loss`; kohya's "
           "`avr_loss`; Lua Torch's `Err`)"),
    Metric("ppl", TRAINING, ("perplexity", "train/ppl", "train_ppl", "train/perplexity", "train_perplexity"),
           "training perplexity (never the validation one)"),
    Metric("grad_norm", TRAINING, ("train/grad_norm", "gradient_norm", "grad-norm", "gnorm", "grad_norm_total"),
           "gradient norm before clipping"),
    Metric("lr", TRAINING, ("learning_rate", "train/lr", "train/learning_rate", "learning rate"), "learning rate"),
    Metric("tokens_per_s", TRAINING, ("tokens_per_sec", "tokens_per_second", "tok/s", "tok_per_s", "throughput",
                                      "train/tokens_per_second", "tokens/sec"), "training throughput"),
    Metric("step", TRAINING, ("global_step", "iter", "iteration", "num_updates", "train/global_step",
                              "time/total_timesteps", "total_timesteps", "timesteps_total"),
           "optimizer steps so far (an RL run's environment steps: stable-baselines3, RLlib)"),
    Metric("loss_scale", TRAINING, ("loss scale",), "fp16 dynamic loss scale in use (halved at each overflow)"),
    Metric("overflow", TRAINING, (), "1 on a line saying an fp16 step was skipped for inf/NaN gradients"),
    Metric("skipped_iters", TRAINING, ("number of skipped iterations",), "steps skipped since the last report"),
    Metric("nan_iters", TRAINING, ("number of nan iterations",), "steps with a NaN loss since the last report"),
    Metric("iter_time_ms", TRAINING, ("elapsed time per iteration (ms)",), "time per step, ms"),
    Metric("val_loss", VALIDATION, ("val/loss", "eval_loss", "eval/loss", "valid_loss", "validation_loss", "val.loss",
                                    "lm loss value"),
           "loss on held-out data"),
    Metric("val_ppl", VALIDATION, ("val/ppl", "eval_ppl", "eval/ppl", "val/perplexity", "eval/perplexity",
                                   "lm loss PPL"),
           "perplexity on held-out data"),
    Metric("gpu_util", SYSTEM, ("util", "utilization", "gpu.util", "gpu_utilization"), "GPU utilisation, %"),
    Metric("gpu_temp", SYSTEM, ("temp", "temperature", "gpu.temp", "temperature_c"), "GPU temperature, C"),
    Metric("alive", SYSTEM, ("process_alive",), "the training process exists"),
)  # fmt: skip
BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}

# THE loss under a trainer's own word, not a term of it: kohya sd-scripts' bar postfix `avr_loss` is the moving
# mean of the one loss it optimises (the only loss it prints, as a Hugging Face `loss` is the mean over its
# logging steps), and Lua Torch's ImageNet example (and fb.resnet.torch) prints its criterion's output as `Err`
# (6.9 = ln 1000 at the start). `err` names the loss only printed alone: `val_err`, `top1_err` and `test_err` are
# error rates, so a bare-only spelling gets no prefixed forms.
BARE_ONLY = frozenset({"err"})

TRAIN_PREFIXES = ("train/", "train_", "training/", "training_")
EVAL_PREFIXES = ("eval/", "eval_", "val/", "val_", "valid/", "valid_", "validation/", "validation_")


def spellings(name: str) -> tuple[str, ...]:
    """A canonical name and its spellings, the name first; an unknown name is its only spelling."""
    metric = BY_NAME.get(name)
    return (name, *metric.spellings) if metric else (name,)


def fold(name: str) -> str:
    """How the agent compares printed names: case, ` `, `-` and `.` do not matter."""
    return name.strip().lower().replace(" ", "_").replace("-", "_").replace(".", "_")


def _index(phases: tuple[Phase, ...], *, unprefixed: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for metric in METRICS:
        if metric.phase in phases:
            for spelling in (metric.name, *metric.spellings):
                if not (unprefixed and (fold(spelling).startswith(TRAIN_PREFIXES + EVAL_PREFIXES)
                                        or spelling in BARE_ONLY)):  # fmt: skip
                    out[fold(spelling)] = metric.name
    return out


# what the agent reads in a log: training and validation metrics (the system ones come from its probes)
_EXACT = _index((TRAINING, VALIDATION), unprefixed=False)
_BASE = _index((TRAINING,), unprefixed=True)


@lru_cache(maxsize=4096)
def canonical(printed: str) -> str:
    """The canonical name of a printed metric name (see the module docstring for the rule)."""
    low = fold(printed)
    if low in _EXACT:
        return _EXACT[low]
    for prefix in TRAIN_PREFIXES:
        if low.startswith(prefix) and len(low) > len(prefix):
            base = low[len(prefix) :]
            return low if base in BARE_ONLY else _BASE.get(base, base)  # `train_err`: an error rate, not `err`
    for prefix in EVAL_PREFIXES:
        if low.startswith(prefix) and len(low) > len(prefix):
            base = _unprefixed(low[len(prefix) :])
            return "val_" + _BASE.get(base, base)
    return low


def _unprefixed(base: str) -> str:
    """A validation name less a second validation prefix: a trainer that prefixes every name of its `valid`
    line (fairseq: `valid_` + `valid_ppl`) still names one validation metric (`val_ppl`), never a new one."""
    for prefix in EVAL_PREFIXES:
        if base.startswith(prefix) and len(base) > len(prefix):
            return base[len(prefix) :]
    return base


@lru_cache(maxsize=4096)
def _names(printed: tuple[str, ...]) -> tuple[str | None, ...]:
    """Canonical names for one line's printed names, in order; None for a repeated name (dropped)."""
    out: list[str | None] = []
    taken: set[str] = set()
    for name in printed:
        key = canonical(name)
        if key in taken:
            key = name.lower()
        out.append(None if key in taken else key)
        taken.add(key)
    return tuple(out)


def normalise(metrics: dict[str, float | int]) -> dict[str, float | int]:
    """One line's metrics under canonical names."""
    # a trainer prints the same names line after line: the mapping is computed once per shape
    return {key: value for key, value in zip(_names(tuple(metrics)), metrics.values(), strict=True) if key is not None}


def first_of(data: Mapping[str, object], name: str) -> object | None:
    """The value of metric `name` in `data` under any of its spellings (the canonical one first)."""
    for spelling in spellings(name):
        if spelling in data:
            return data[spelling]
    return None


# -- the metric that matters: eval metrics a run may be judged by ----------------------------------------


@dataclass(frozen=True, slots=True)
class Quality:
    """An eval metric that can be a run's primary metric: its family (the token it is recognised by in a
    printed name), its direction, and whether it is only ever measured on held-out data."""

    family: str
    mode: str  # min: lower is better
    eval_only: bool  # WER, BLEU, mAP: measured on held-out data even without an `eval_` prefix


QUALITIES: tuple[Quality, ...] = (
    Quality("wer", "min", True), Quality("cer", "min", True),
    Quality("bleu", "max", True), Quality("sacrebleu", "max", True), Quality("chrf", "max", True),
    Quality("rouge1", "max", True), Quality("rouge2", "max", True), Quality("rougel", "max", True),
    Quality("map", "max", True), Quality("miou", "max", True), Quality("exact_match", "max", True),
    Quality("accuracy", "max", False), Quality("acc", "max", False), Quality("top1", "max", False),
    Quality("acc1", "max", False), Quality("f1", "max", False), Quality("auc", "max", False),
    Quality("roc_auc", "max", False), Quality("mcc", "max", False),
)  # fmt: skip
_QUALITY = {q.family: q for q in QUALITIES}
_TOKEN_SPLIT = str.maketrans({c: " " for c in "/()[]@:"})


def is_validation(name: str) -> bool:
    """Whether metric `name` (canonical, as the agent publishes it, or printed) is measured on held-out data."""
    metric = BY_NAME.get(name)
    if metric is not None:
        return metric.phase is VALIDATION
    return fold(name).startswith(EVAL_PREFIXES)


@lru_cache(maxsize=4096)
def quality(name: str) -> Quality | None:
    """The primary-metric family of eval metric `name` (`val_wer`, `eval_accuracy`, `coco/bbox_mAP`,
    `metrics/mAP50-95(B)`), or None: a training metric (`acc`, `train/f1`), or no known family."""
    low = fold(name)
    held_out = low.startswith(EVAL_PREFIXES)
    if low.startswith(TRAIN_PREFIXES):
        return None
    for prefix in EVAL_PREFIXES:
        if low.startswith(prefix):
            low = low[len(prefix) :]
            break
    last = low.translate(_TOKEN_SPLIT).split()
    if not last:
        return None
    whole = last[0] if len(last) == 1 else last[-1] if low.rsplit("/", 1)[-1] == last[-1] else last[-2]
    for candidate in (whole, *reversed(whole.split("_"))):
        family = candidate.rstrip("0123456789_") if candidate.startswith("map") else candidate
        q = _QUALITY.get(candidate) or _QUALITY.get(family)
        if q is not None and (held_out or q.eval_only):
            return q
    return None


# -- what a metric event may hold ----------------------------------------------------------------------

MAX_STEP = 2**63 - 1  # a step count, not a measurement: no trainer gets near it
_FLOAT_MAX_INT = int(sys.float_info.max)  # a larger int cannot become a float (policies compare floats)


def value_problem(name: str, value: object) -> str | None:
    """Why `value` cannot be metric `name` in a `metric` event, or None when it can.

    A metric is a number: NaN and +/-Inf are kept (a NaN loss is what the watchdog is for), but
    `step` counts optimizer steps, so it is a finite whole number >= 0 (`7.0` counts as 7).
    Whether an Inf came from an overflowing numeral (`1e400`) is for the parser to tell (see
    core/jsonload.py): here it is already Inf.
    """
    if len(name) > MAX_NAME_CHARS:
        return name_problem(name)
    if isinstance(value, bool):  # JSON true/false: policies read them as 1/0
        return f"step must be a whole number, got {value!r}" if name == "step" else None
    if isinstance(value, int):
        if not -_FLOAT_MAX_INT <= value <= _FLOAT_MAX_INT:
            return f"{name} is out of range"
    elif not isinstance(value, float):
        return f"{name} is not a number ({type(value).__name__})"
    if name == "step" and not (0 <= value <= MAX_STEP and float(value).is_integer()):  # NaN fails too
        return f"step must be a whole number from 0 to {MAX_STEP}, got {value!r}"
    return None


_USUAL = 1e300  # metric data summing to less than this (in size) needs no closer look


def plainly_valid(data: Mapping[str, object]) -> bool:
    """The usual metric data, told in one C-speed sum: finite numbers of ordinary size and a plain int step.

    False means "look closer" (`data_problem`), not "invalid": NaN, Inf and huge values fall outside
    the sum's range, and a value that is not a number makes it raise."""
    step = data.get("step", 0)
    try:
        return -_USUAL < sum(data.values()) < _USUAL and type(step) is int and 0 <= step <= MAX_STEP  # type: ignore[arg-type]
    except (TypeError, OverflowError):  # not a number; an int too large to add to a float
        return False


def data_problem(data: Mapping[str, object]) -> str | None:
    """The first problem of a `metric` event's data (see `value_problem`), or None."""
    for name, value in data.items():
        problem = value_problem(name, value)
        if problem is not None:
            return problem
    return None


def without_problems(data: dict[str, float | int]) -> tuple[dict[str, float | int], list[str]]:
    """`data` less the values `value_problem` refuses, and the problems: what a producer publishes."""
    if plainly_valid(data) and names_fit(data):
        return data, []
    problems = [p for name, value in data.items() if (p := value_problem(name, value)) is not None]
    if not problems:
        return data, problems
    return {k: v for k, v in data.items() if value_problem(k, v) is None}, problems


# -- which names make a line a metrics line -------------------------------------------------------------

# measured on the run (a config holds settings: the learning rate, step counts, sizes, the fp16 scaler's
# `'loss_scale': 0`, which in DeepSpeed's config means dynamic); an `overflow` is only ever reported
_SETTINGS = frozenset({"lr", "step", "loss_scale", "skipped_iters", "nan_iters"})
_MEASURED = frozenset(m.name for m in METRICS if m.phase is not SYSTEM) - _SETTINGS
# a loss by its last word (`total_loss`, `giou_loss`, xgboost's `logloss`; not `loss_scale`)
_LOSS_WORDS = frozenset({"loss", "logloss", "mlogloss"})
_ACCURACY_WORDS = frozenset({"acc", "accuracy"})  # an accuracy by any word (`top1_acc`, `accuracy_top-1`)
# what ends the name of a setting rather than a measurement: `eval_steps`, `val_check_interval`, `eval_batch_size`
_SETTING_WORDS = frozenset({"steps", "step", "size", "interval", "strategy", "delay", "epochs", "every", "freq",
                            "frequency", "workers", "batches", "iters"})  # fmt: skip


@lru_cache(maxsize=4096)
def is_known(name: str) -> bool:
    """Whether a canonical name marks a line as a step's metrics on its own: a measured metric of the table
    (`loss`, `grad_norm`; not `lr` or `step`, which configs print too), a validation metric (`val_acc`; not a
    setting such as `val_check_interval`), a loss by its last word (`total_loss`), or an accuracy."""
    if name in _MEASURED:
        return True
    words = name.replace("/", "_").split("_")
    if name.startswith("val_") and len(name) > 4:
        return words[-1] not in _SETTING_WORDS
    return words[-1] in _LOSS_WORDS or not _ACCURACY_WORDS.isdisjoint(words)


# -- what a name measures: its role (the data it was measured on) and its quantity ---------------------------

ROLES = ("train", "eval", "test")
# the quantity a name's last word says (after `canonical`): `val_loss` -> loss, `top1_acc` -> accuracy
QUANTITY_WORDS: dict[str, str] = {
    "loss": "loss", "logloss": "loss", "mlogloss": "loss", "nll": "loss",
    "acc": "accuracy", "accuracy": "accuracy", "acc1": "accuracy", "top1": "accuracy",
    "ppl": "perplexity", "perplexity": "perplexity",
    "error": "error", "err": "error", "wer": "error", "cer": "error", "rmse": "error", "mae": "error",
    "lr": "lr", "grad_norm": "grad norm", "gnorm": "grad norm",
    "tokens_per_s": "throughput", "throughput": "throughput", "samples_per_second": "throughput",
    "steps_per_second": "throughput",
}  # fmt: skip


@lru_cache(maxsize=4096)
def role(name: str) -> str:
    """The data a metric (printed or canonical name) was measured on: `train`, `eval` (held-out data during
    training: `val_loss`, `eval/acc`, `valid-logloss`) or `test` (`test_loss`, `test acc`)."""
    low = fold(name)
    if low.startswith("test"):
        return "test"
    return "eval" if canonical(name).startswith("val_") else "train"


# what follows `loss_` in a name that is no loss term: the fp16 scaler's scale, a term's weight or coefficient
_LOSS_SETTINGS = frozenset({"scale", "scaler", "weight", "weights", "coef", "coeff", "factor", "type", "fn"})


@lru_cache(maxsize=4096)
def quantity(name: str) -> str | None:
    """What a metric measures, one of `QUANTITY_WORDS`' values (`loss`, `accuracy`, `perplexity`, `error`, `lr`,
    `grad norm`, `throughput`), or None: read from the canonical name, whole, then by its last word (`top1_acc`),
    then a loss by its first (`loss_cls`, `loss_disc`: mmdet's and VITS's loss terms)."""
    key = canonical(name)
    for prefix in ("val_", "test_", "test/"):
        if key.startswith(prefix):
            key = key[len(prefix) :]
    if key in QUANTITY_WORDS:
        return QUANTITY_WORDS[key]
    words = key.replace("/", "_").replace("-", "_").split("_")
    if words[-1] in QUANTITY_WORDS:
        return QUANTITY_WORDS[words[-1]]
    return "loss" if words[0] in _LOSS_WORDS and words[-1] not in _LOSS_SETTINGS else None


def at_step(step: object) -> str:
    """Where in a run, as a person reads it: `step 120`; before the first metric line (a fault at start-up)
    there is no step yet, which is said in words, never as `step None`."""
    return f"step {step}" if step is not None else "before the first step"


# an eval metric's direction by what it measures, after `quality`'s families: lower is better for these
_LOWER_IS_BETTER = frozenset({"loss", "perplexity", "error"})


@lru_cache(maxsize=4096)
def direction(name: str) -> str | None:
    """Whether a lower (`min`) or a higher (`max`) value of eval metric `name` is better, or None: a training or
    test metric, or one whose name says neither. A known family first (`quality`: mAP, BLEU, F1, AUC, accuracy up;
    WER, CER down), then the quantity its last word says (`val_loss`, `eval-logloss`, `val_ppl`, `val_error`
    down; `val_top1_acc` up)."""
    found = quality(name)
    if found is not None:
        return found.mode
    if role(name) != "eval":
        return None
    what = quantity(name)
    if what in _LOWER_IS_BETTER:
        return "min"
    return "max" if what == "accuracy" else None

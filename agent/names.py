"""Canonical metric names, so a policy rule says `loss` whatever the trainer printed.

The canonical names are the policy's (`policies/names.py`): `loss`, `val_loss`,
`val_ppl`, `grad_norm`, `lr`, `tokens_per_s`, `step`, `epoch`, ... The mapping:

1. lower-case; ` `, `-` and `.` become `_` inside the name, `/` stays a separator;
2. a phase prefix is split off: `train/`, `train_`, `training_` (training: dropped) and
   `eval/`, `eval_`, `val/`, `val_`, `valid/`, `valid_`, `validation/`, `validation_` (evaluation:
   becomes `val_`);
3. the rest goes through ALIASES (`learning_rate` -> `lr`, `gnorm` -> `grad_norm`, `perplexity`
   -> `ppl`, `global_step` / `iter` / `num_updates` -> `step`, `tokens_per_second` -> `tokens_per_s`);
4. the phase prefix goes back on: `train/loss` -> `loss`, `eval_loss` -> `val_loss`,
   `eval/perplexity` -> `val_ppl`, `train/learning_rate` -> `lr`.

Any other name is kept (lower-cased). When two printed names map to one canonical name in the
same line, the first keeps it and the second keeps its printed name.
"""

from __future__ import annotations

from functools import lru_cache

TRAIN_PREFIXES = ("train/", "train_", "training/", "training_")
EVAL_PREFIXES = ("eval/", "eval_", "val/", "val_", "valid/", "valid_", "validation/", "validation_")
ALIASES = {
    "learning_rate": "lr",
    "gnorm": "grad_norm",
    "gradient_norm": "grad_norm",
    "grad_norm_total": "grad_norm",
    "perplexity": "ppl",
    "global_step": "step",
    "iter": "step",
    "iteration": "step",
    "num_updates": "step",
    "tokens_per_second": "tokens_per_s",
    "tokens_per_sec": "tokens_per_s",
    "tok/s": "tokens_per_s",
    "tok_per_s": "tokens_per_s",
    "throughput": "tokens_per_s",
}


@lru_cache(maxsize=4096)
def canonical(name: str) -> str:
    low = name.strip().lower().replace(" ", "_").replace("-", "_").replace(".", "_")
    for prefix in TRAIN_PREFIXES:
        if low.startswith(prefix) and len(low) > len(prefix):
            return ALIASES.get(low[len(prefix) :], low[len(prefix) :])
    for prefix in EVAL_PREFIXES:
        if low.startswith(prefix) and len(low) > len(prefix):
            base = low[len(prefix) :]
            return "val_" + ALIASES.get(base, base)
    return ALIASES.get(low, low)


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
    # a trainer prints the same names line after line: the mapping is computed once per shape
    return {key: value for key, value in zip(_names(tuple(metrics)), metrics.values(), strict=True) if key is not None}

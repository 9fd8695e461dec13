"""Pure parsers of the generic line shapes (dict and JSON lines, `iter N:` phrases, `|`-separated pieces, and
the general pair reader), the entries of the format table in agent.formats. Each returns raw `name -> number`
pairs as printed, {} when the line is not its shape; no line makes one raise."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from trainwarden.agent import trainer_lines as tl
from trainwarden.agent.pairs import (
    NUM,
    Metrics,
    colon,
    key_value,
    numbers,
    parse_number,
    phrase,
    phrases,
    prefixed,
    spaced,
)
from trainwarden.core.jsonload import float_literal, loads
from trainwarden.core.metrics import METRICS

# a Python dict's repr; transformers 5.x quotes its numbers (`'loss': '0.05'`, `'grad_norm': 'nan'`)
PYDICT_RE = re.compile(rf"'([^']+)':\s*({NUM})(?![\w.])", re.IGNORECASE)
PYDICT_QUOTED_RE = re.compile(rf"'([^']+)':\s*('?)({NUM})'?(?![\w.])", re.IGNORECASE)
# nanoGPT `iter 100: loss 4.2, time 12.3ms`, mlx-lm `Iter 5: Train loss 3.361, Learning Rate 1.000e-05, ...`
ITER_RE = re.compile(r"^\s*(iter|step)\s+(\d+):\s*(.*)$", re.IGNORECASE)
FAIRSEQ_SUBSET_RE = re.compile(r"^\s*(valid|test)\b.*?\bsubset\b")
# a segment that is only a position: `epoch 001`, Megatron's `iteration     5426/  250000`, `✅ Epoch 1/3`, `it 150`
POSITION_RE = re.compile(r"^[^\w|]*(epoch|iteration|iter|it|step)\s+(\d+)\s*(?:/\s*\d+)?\s*$", re.IGNORECASE)
# fairseq's train_inner lines: `epoch 001:    100 / 1563 loss=9.1, ...` (`| epoch 010  2000 / 8223 ...` before 0.6)
FAIRSEQ_INNER_RE = re.compile(r"^\s*\|?\s*epoch (\d+)(?::\s*|\s+)\d+\s*/\s*\d+\s")
# Megatron: `validation loss at iteration 14194 | lm loss value: 2.72 | lm loss PPL: 15.2 |`
VALIDATION_AT_RE = re.compile(r"^\s*(?:validation|evaluation)\b.*?\bat iteration (\d+)\b", re.IGNORECASE)
POSITION_NAMES = tl.POSITION_NAMES | {"wall", "train_wall"}  # fairseq names that stay as they are in a valid line
# gradient boosting: xgboost `[10]\ttrain-logloss:0.6\teval-logloss:0.7`, lightgbm `[10]\tvalid_0's auc: 0.95`
BOOSTING_RE = re.compile(r"^\s*\[(\d+)\]\t(.*)$")
LIGHTGBM_PAIR_RE = re.compile(rf"(\w+)'s ([\w@.-]+): ({NUM})", re.IGNORECASE)
HELD_OUT = ("valid", "val", "eval", "test")


def python_dict(line: str) -> Metrics:
    """A Hugging Face Trainer line: the repr of a dict, so NaN prints as a bare `nan` (4.x) or `'nan'` (5.x).
    A quoted number is a float 5.x formatted (`f"{v:.4g}"`): `'epoch': '1'` is epoch 1.0, not a whole count."""
    if "': '" not in line:
        return numbers(PYDICT_RE.findall(line))  # 4.x: no value quoted
    out: Metrics = {}
    for name, quoted, value in PYDICT_QUOTED_RE.findall(line):
        try:
            number = parse_number(value)
        except ValueError:
            continue  # an overflowing numeral: this value only is left out
        out[name] = float(number) if quoted and type(number) is int else number
    return out


_OVERFLOW = object()  # what an overflowing numeral parses to in a JSON line: not a number, so left out


def _json_float(text: str) -> object:
    try:
        return float_literal(text)
    except ValueError:
        return _OVERFLOW


def json_line(line: str) -> Metrics:
    try:
        obj = loads(line, parse_float=_json_float)
    except ValueError:  # not JSON, or nested too deep to be a metrics line
        return {}
    out: Metrics = {}
    if isinstance(obj, dict):
        _flatten(obj, "", out)
    return out


def _flatten(obj: dict[str, Any], prefix: str, out: Metrics) -> None:
    for key, value in obj.items():
        name = f"{prefix}{key}"
        kind = type(value)
        if kind is int or kind is float:
            out[name] = value
        elif kind is str:
            try:
                out[name] = parse_number(value)  # fairseq's JSON log writes numbers as strings
            except ValueError:
                continue
        elif kind is dict:
            _flatten(value, f"{name}/", out)


def iter_phrases(line: str) -> Metrics:
    """nanoGPT `iter 100: loss 4.2345, time 12.3ms, mfu 35.12%`, `step 250: train loss 2.1, val loss 2.2`;
    mlx-lm `Iter 5: Train loss 3.361, Learning Rate 1.000e-05, It/sec 0.165, Peak mem 8.104 GB` and
    `Iter 1: Val loss 3.770, Val took 57.861s`."""
    m = ITER_RE.match(line)
    if m is None:
        return {}
    out: Metrics = {m.group(1).lower(): int(m.group(2))}
    out.update(phrases(m.group(3).split(",")))
    return out if len(out) > 1 else {}


def pipe_separated(line: str) -> Metrics:
    """`|`-separated pieces, each a position, a phase or pairs: fairseq (`epoch 001 | valid on 'valid' subset |
    loss 8.1 | ppl 238.4 | num_updates 1563`), Megatron (`iteration 5/ 10 | lm loss: 2.5E+00 | grad norm: 0.2 |`),
    torchtune (`Step 1 | loss:2.08 lr:2e-05`)."""
    out: Metrics = {}
    validation = False
    for segment in line.split("|"):
        if not segment or segment.isspace():
            continue
        position = POSITION_RE.match(segment)
        if position is not None:
            name = position.group(1).lower()
            out["iter" if name == "it" else name] = int(position.group(2))
            continue
        subset = FAIRSEQ_SUBSET_RE.match(segment)
        at = VALIDATION_AT_RE.match(segment) if subset is None else None
        if subset is not None or at is not None:
            validation = True
            if at is not None:
                out["iteration"] = int(at.group(1))
            rest = segment[subset.end() :] if subset is not None else ""
            if "=" in rest:  # fairseq before 0.6: `valid on 'valid' subset  1000 / 1311 loss=1.60`
                out.update(prefixed(key_value(rest), "val_", POSITION_NAMES))
            continue
        inner = FAIRSEQ_INNER_RE.match(segment)
        if inner is not None:
            out["epoch"] = int(inner.group(1))
        if "=" in segment:
            found = key_value(segment)
        elif (pair := phrase(segment)) is not None:
            found = dict([pair])
        else:
            found = pairs_with_head(segment, colon) or spaced(segment)
        out.update(prefixed(found, "val_", POSITION_NAMES) if validation else found)
    return out if set(out) - POSITION_NAMES else {}


def pairs_with_head(line: str, pairs: Callable[[str], Metrics]) -> Metrics:
    """`key=value` or `key: value` pairs with the position and phase the text before the first one names."""
    metrics = pairs(line)
    if not metrics:
        return metrics
    first = next(iter(metrics))
    if first == "Train" and (epoch := tl.EPOCH_BATCH_RE.match(line)) is not None:  # timm: `Train: 0 [  32/33 ...`
        del metrics["Train"]
        step = tl.batch_step(line[epoch.end() :], int(epoch.group(3)))
        return {"epoch": int(epoch.group(3)), **({} if step is None else {"step": step}), **metrics}
    start = line.find(first)  # where the first pair starts
    return metrics if start <= 0 or line[:start].isspace() else tl.with_head(line, start, metrics)


def boosting(line: str) -> Metrics:
    """xgboost's `[N]\\t<set>-<metric>:value` and lightgbm's `[N]\\t<set>'s <metric>: value`: N is the boosting
    round (the step); a held-out set's metrics are named `val_<metric>`, a training set's `<metric>`."""
    found = BOOSTING_RE.match(line)
    if found is None:
        return {}
    rest = found.group(2)
    out: Metrics = {"step": int(found.group(1))}
    if "'s " in rest:
        for data, metric, value in LIGHTGBM_PAIR_RE.findall(rest):
            out.update(numbers([(_boosting_name(data, metric), value)]))
    else:
        for name, value in colon(rest).items():
            data, _, metric = name.rpartition("-")
            out[_boosting_name(data, metric) if data else name] = value
    return out if len(out) > 1 else {}


def _boosting_name(data: str, metric: str) -> str:
    low = data.lower()
    if low.startswith(HELD_OUT):
        return f"val_{metric}"
    return metric if low.startswith(("train", "learn")) else f"{data}_{metric}"


# a name or a value in single quotes (`'loss': 'nan'` among unquoted fields: a Python repr inside a log line)
QUOTED_RE = re.compile(r"'([^'\s]+)'")
SPACED_COLON_RE = re.compile(r"(?<=\w) +: ")  # `train loss : 1.3331`
# the names of two words a colon pair may end (`Current learning rate: 0.01` is `lr`, not `rate`)
TWO_WORDS = {s.rsplit(" ", 1)[1]: s for m in METRICS for s in m.spellings if s.count(" ") == 1}


def general(line: str) -> Metrics:
    """Any other line: `key=value` pairs, else `key: value` pairs, else `name value` pairs (`step 10 loss 2.31`),
    each with the position and phase the text before them names. Quotes around a name or a value are dropped
    (`iter: 20, 'loss': 'nan'`: PaddleDetection), and so are blanks before a colon (`train loss : 1.33`)."""
    if "'" in line and "''" not in line:
        line = QUOTED_RE.sub(r"\1", line)
    if "=" in line:
        found = pairs_with_head(line, key_value)
        if found:
            return found
    if ":" in line:
        found = pairs_with_head(line, colon)
        if not found and " :" in line:
            found = pairs_with_head(SPACED_COLON_RE.sub(": ", line), colon)
        if found:
            return _two_word_names(line, found)
    return tl.with_batch(line, spaced(line))


def _two_word_names(line: str, found: Metrics) -> Metrics:
    """`rate` read from `learning rate: 0.01` is the vocabulary's `learning rate`."""
    for key in [k for k in found if k in TWO_WORDS]:
        name = TWO_WORDS[key]
        if f"{name}:" in line.lower() and name not in found:
            found = {(name if k == key else k): v for k, v in found.items()}
    return found

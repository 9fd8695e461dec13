"""Pure parsers for the metric lines real trainers print. Each returns raw `name -> number` pairs.

Every format read, with its position (a name that canonicalises to `step`, or `epoch`), is listed in
docs/agent.md with a real line each; the prefixes stripped first are in agent.prefixes. The generic shapes:

| format | example |
|---|---|
| key=value | `step=120 loss=2.31 lr=3e-4` |
| key: value | `epoch: 1, step: 100, loss: 2.3456` |
| Hugging Face Trainer dict | `{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}` |
| JSON lines | `{"step": 100, "train/loss": 2.31}` (nested objects flattened with '/') |
| tqdm / Lightning bar | `Epoch 1:  45%|████▌ | 450/1000 [00:30<00:36, 15.00it/s, v_num=0, train_loss=2.310]` |
| `iter N:` + phrases | nanoGPT `iter 100: loss 4.2345, time 12.3ms`; mlx-lm `Iter 5: Train loss 3.361, ...` |
| `|`-separated | fairseq `epoch 001 | valid on 'valid' subset | loss 8.1`, Megatron `iteration 5/ 10 | lm loss: 2.5` |

A position printed before `key: value` pairs (`Epoch [3][50/1749]`, `Iteration 100,`, `global step 40:`) is
read with them (agent.trainer_lines.with_head), and a line about held-out data (`Epoch(val)`, `Test:`,
`valid on 'valid' subset`, `validation loss at iteration`) has its names prefixed `val_`.

Values `nan`, `inf` and `-inf` in any case are kept: they are what must not be missed. A numeral too large
for a float (`1e400`) is not an Inf but an overflow: that value is left out (the rest of the line is kept),
and so is an integer too long to convert. A line no parser can read (JSON nested thousands deep) has no
metrics; no line makes a parser raise.
"""

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
)
from trainwarden.agent.prefixes import strip_prefix
from trainwarden.events.jsonload import float_literal, loads

__all__ = ["Metrics", "parse_metrics", "parse_number"]

PYDICT_RE = re.compile(rf"'([^']+)':\s*({NUM})(?![\w.])", re.IGNORECASE)
# tqdm / Lightning: `450/1000 [00:30<00:36, 15.00it/s, key=value, ...]`, optionally `Epoch 3:` before.
BAR_RE = re.compile(r"(\d+)/(\d+)\s*\[[^\]]*?(?:([\d.]+)(it/s|s/it))?(?:,\s*([^\]]*))?\]")
EPOCH_RE = re.compile(r"\bEpoch\s+(\d+)\b")
# nanoGPT `iter 100: loss 4.2, time 12.3ms`, mlx-lm `Iter 5: Train loss 3.361, Learning Rate 1.000e-05, ...`
ITER_RE = re.compile(r"^\s*(iter|step)\s+(\d+):\s*(.*)$", re.IGNORECASE)
FAIRSEQ_SUBSET_RE = re.compile(r"^\s*(valid|test)\b.*?\bsubset\b")
# a segment that is only a position: `epoch 001`, Megatron's `iteration     5426/  250000`
POSITION_RE = re.compile(r"^\s*(epoch|iteration|iter|step)\s+(\d+)\s*(?:/\s*\d+)?\s*$", re.IGNORECASE)
# fairseq's train_inner lines: `epoch 001:    100 / 1563 loss=9.1, ...` (`| epoch 010  2000 / 8223 ...` before 0.6)
FAIRSEQ_INNER_RE = re.compile(r"^\s*\|?\s*epoch (\d+)(?::\s*|\s+)\d+\s*/\s*\d+\s")
# Megatron: `validation loss at iteration 14194 | lm loss value: 2.72 | lm loss PPL: 15.2 |`
VALIDATION_AT_RE = re.compile(r"^\s*(?:validation|evaluation)\b.*?\bat iteration (\d+)\b", re.IGNORECASE)
POSITION_NAMES = tl.POSITION_NAMES | {"wall", "train_wall"}  # fairseq names that stay as they are in a valid line


def python_dict(line: str) -> Metrics:
    """A Hugging Face Trainer line: the repr of a dict, so NaN prints as a bare `nan`."""
    return numbers(PYDICT_RE.findall(line))


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


def progress_bar(line: str) -> Metrics:
    """The last redraw of a tqdm or Lightning bar in the line; metrics from its postfix."""
    found = None
    for found in BAR_RE.finditer(line):  # noqa: B007 - the last match is the newest redraw
        pass
    if found is None:
        return {}
    out: Metrics = {}
    epoch = EPOCH_RE.search(line)
    if epoch is not None:
        out["epoch"] = int(epoch.group(1))
    postfix = found.group(5)
    if postfix:
        out.update(key_value(postfix))
    if len(out) == ("epoch" in out):
        return {}  # a bar without metrics (just progress and rate) says nothing about training
    return out


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
            out[position.group(1).lower()] = int(position.group(2))
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
            found = _pairs_with_head(segment, colon)
        out.update(prefixed(found, "val_", POSITION_NAMES) if validation else found)
    return out if set(out) - POSITION_NAMES else {}


def _pairs_with_head(line: str, pairs: Callable[[str], Metrics]) -> Metrics:
    """`key=value` or `key: value` pairs with the position and phase the text before the first one names."""
    metrics = pairs(line)
    if not metrics:
        return metrics
    first = next(iter(metrics))
    if first == "Train" and (epoch := tl.EPOCH_BATCH_RE.match(line)) is not None:  # timm: `Train: 0 [  32/33 ...`
        del metrics["Train"]
        return {"epoch": int(epoch.group(2)), **metrics}
    start = line.find(first)  # where the first pair starts
    return metrics if start <= 0 or line[:start].isspace() else tl.with_head(line, start, metrics)


def parse_metrics(line: str) -> Metrics:
    """The metrics in one log line, whatever the format; {} when it has none (or cannot be read).

    Cheap tests on the line pick the parser, so ordinary lines cost a few string scans.
    """
    try:
        return _parse_metrics(strip_prefix(line))
    except (ValueError, OverflowError):  # a numeral too long to convert (`iter 999...9:`): not a metrics line
        return {}


def _parse_metrics(line: str) -> Metrics:  # one cheap test per format, in order
    stripped = line.lstrip()
    if not stripped:
        return {}
    if "{'" in line:  # also after a progress bar redraw on the same line
        return python_dict(line)
    first = stripped[0]
    if first == "{" and stripped.startswith('{"'):
        return json_line(stripped)
    if "loss scale" in line or "overflow on iteration" in line:  # also glued to a bar redraw
        found = tl.overflow(line)
        if found:
            return found
    if "it/s" in line or "s/it" in line:
        if "|Loss: " in line:
            return tl.torchtune_bar(stripped)
        if first.isdigit() and "G " in line:
            found = tl.ultralytics(line)
            if found:
                return found
        return progress_bar(line)
    if first in "isIS" and ":" in line and stripped[:4].lower() in ("iter", "step"):
        found = iter_phrases(stripped)
        if found:
            return found
    if " | " in line or first == "|":
        found = pipe_separated(line)
        if found:
            return found
    if " net output #" in line:
        return tl.caffe_output(line)
    if first.isdigit() and ":" in line:
        found = tl.step_loss(line)
        if found:
            return found
    if first == "a" and stripped.startswith("all "):
        return tl.ultralytics_validation(line)
    if "=" in line:
        found = _pairs_with_head(line, key_value)
        if found:
            return found
    if ":" in line:
        return _pairs_with_head(line, colon)
    return {}

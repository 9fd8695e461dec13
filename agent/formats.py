"""Pure parsers for the metric lines real trainers print. Each returns raw `name -> number` pairs.

| format | example |
|---|---|
| key=value | `step=120 loss=2.31 lr=3e-4` |
| key: value | `epoch: 1, step: 100, loss: 2.3456` |
| Hugging Face Trainer dict | `{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}` |
| JSON lines | `{"step": 100, "train/loss": 2.31}` (nested objects flattened with '/') |
| tqdm / Lightning bar | `Epoch 1:  45%|████▌ | 450/1000 [00:30<00:36, 15.00it/s, v_num=0, train_loss=2.310]` |
| nanoGPT | `iter 100: loss 4.2345, time 12.3ms, mfu 35.1%`, `step 250: train loss 2.1, val loss 2.2` |
| fairseq (`|`-separated) | `epoch 001 | valid on 'valid' subset | loss 8.123 | ppl 238.4 | num_updates 1563` |

Names are returned as printed; `trainwarden.events.metrics.normalise` maps them to canonical names. Values
`nan`, `inf` and `-inf` in any case are kept: they are what must not be missed. A numeral too large for a
float (`1e400`) is not an Inf but an overflow: that value is left out (the rest of the line is kept), and
so is an integer too long to convert. A line no parser can read (JSON nested thousands deep) has no metrics;
no line makes a parser raise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from trainwarden.events.jsonload import float_literal, loads

Metrics = dict[str, float | int]

NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)"
KEY = r"[A-Za-z_][\w./-]*"
# `key=value`, and `key: value` (a timestamp's `12:30:45` is not a key: keys start with a letter).
# A value ends at a space, a comma, ']' or the end: `4,000` (a count with a thousands separator)
# and `12:30` are not metrics.
KV_RE = re.compile(rf"(?<![\w/.-])({KEY})\s*=\s*({NUM})(?![\w.]|,\d)", re.IGNORECASE)
COLON_RE = re.compile(rf"(?<![\w/.-])({KEY}):\s*({NUM})(%?)(?![\w.:-]|,\d)", re.IGNORECASE)
PYDICT_RE = re.compile(rf"'([^']+)':\s*({NUM})(?![\w.])", re.IGNORECASE)
# tqdm / Lightning: `450/1000 [00:30<00:36, 15.00it/s, key=value, ...]`, optionally `Epoch 3:` before.
BAR_RE = re.compile(r"(\d+)/(\d+)\s*\[[^\]]*?(?:([\d.]+)(it/s|s/it))?(?:,\s*([^\]]*))?\]")
EPOCH_RE = re.compile(r"\bEpoch\s+(\d+)\b")
NANOGPT_RE = re.compile(r"^\s*(iter|step)\s+(\d+):\s*(.*)$")
WORDS_VALUE_RE = re.compile(rf"^\s*([A-Za-z_][\w./ -]*?)\s+({NUM})\s*(%|ms|s)?\s*$", re.IGNORECASE)
FAIRSEQ_SUBSET_RE = re.compile(r"^\s*(valid|test)\b.*\bsubset\b")
FAIRSEQ_EPOCH_RE = re.compile(r"^\s*epoch\s+(\d+)\b")
DROP = frozenset({"v_num"})  # Lightning's run version: not a metric
# fairseq names that stay as they are inside a `valid on 'valid' subset` line
NOT_PER_SUBSET = frozenset({"epoch", "num_updates", "step", "wall", "train_wall"})


def parse_number(text: str) -> float | int:
    """`12` -> 12, `3e-4` -> 0.0003; also `nan`, `-nan`, `inf`, `Infinity` in any case.

    Raises ValueError for a numeral that overflows a float (`1e400`) or an integer too long to convert."""
    return int(text) if text.lstrip("+-").isdigit() else float_literal(text)


def _numbers(pairs: Iterable[tuple[str, str]]) -> Metrics:
    out: Metrics = {}
    for key, value in pairs:
        try:
            out[key] = parse_number(value)
        except ValueError:
            continue  # an overflowing numeral: this value only is left out
    return out


def key_value(line: str) -> Metrics:
    return _numbers(KV_RE.findall(line))


def colon(line: str) -> Metrics:
    return _numbers((key, value) for key, value, _pct in COLON_RE.findall(line))


def python_dict(line: str) -> Metrics:
    """A Hugging Face Trainer line: the repr of a dict, so NaN prints as a bare `nan`."""
    return _numbers(PYDICT_RE.findall(line))


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
        out.update((k, v) for k, v in key_value(postfix).items() if k not in DROP)
    if len(out) == ("epoch" in out):
        return {}  # a bar without metrics (just progress and rate) says nothing about training
    return out


def nanogpt(line: str) -> Metrics:
    """`iter 100: loss 4.2345, time 12.3ms, mfu 35.12%` and `step 250: train loss 2.1, val loss 2.2`."""
    m = NANOGPT_RE.match(line)
    if m is None:
        return {}
    out: Metrics = {"iter" if m.group(1) == "iter" else "step": int(m.group(2))}
    for part in m.group(3).split(","):
        pair = WORDS_VALUE_RE.match(part)
        if pair is None:
            continue
        name, unit = pair.group(1).strip().replace(" ", "_"), pair.group(3)
        try:
            value = parse_number(pair.group(2))
        except ValueError:
            continue
        out[f"{name}_ms" if unit == "ms" else f"{name}_s" if unit == "s" else name] = value
    return out if len(out) > 1 else {}


def pipe_separated(line: str) -> Metrics:
    """fairseq: `... | epoch 001 | valid on 'valid' subset | loss 8.1 | ppl 238.4 | num_updates 1563`,
    and its train_inner lines (`epoch 001:  100 / 1563 loss=9.1, ppl=478.2, ...`)."""
    out: Metrics = {}
    prefix = ""
    for segment in line.split("|"):
        subset = FAIRSEQ_SUBSET_RE.match(segment)
        if subset is not None:
            prefix = f"{subset.group(1)}_"
            continue
        epoch = FAIRSEQ_EPOCH_RE.match(segment)
        if epoch is not None:
            out["epoch"] = int(epoch.group(1))
        if "=" in segment:
            out.update(key_value(segment))
            continue
        pair = WORDS_VALUE_RE.match(segment)
        if pair is not None and " " not in (name := pair.group(1).strip()) and name != "epoch":
            out.update(_numbers([(name if name in NOT_PER_SUBSET else f"{prefix}{name}", pair.group(2))]))
    return out if set(out) - {"epoch"} else {}


Parser = Callable[[str], Metrics]


def parse_metrics(line: str) -> Metrics:
    """The metrics in one log line, whatever the format; {} when it has none (or cannot be read).

    Cheap tests on the line pick the parser, so ordinary lines cost a few string scans.
    """
    try:
        return _parse_metrics(line)
    except ValueError:  # a numeral too long to convert (`iter 999...9:`): not a metrics line
        return {}


def _parse_metrics(line: str) -> Metrics:
    stripped = line.lstrip()
    if not stripped:
        return {}
    if "{'" in line:  # also after a progress bar redraw on the same line
        return python_dict(line)
    if stripped.startswith('{"'):
        return json_line(stripped)
    first = stripped[0]
    if "it/s" in line or "s/it" in line:
        return progress_bar(line)
    if first in "is" and (stripped.startswith("iter ") or stripped.startswith("step ")) and ":" in line:
        found = nanogpt(stripped)
        if found:
            return found
    if " | " in line:
        found = pipe_separated(line)
        if found:
            return found
    if "=" in line:
        found = key_value(line)
        if found:
            return found
    if ": " in line:
        return colon(line)
    return {}

"""Pure parsing of training-log lines into metrics and notable lines."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# `key=value` pairs; keys may hold '/', '.', '-' (train/loss, val.ppl); values are numbers,
# including nan / inf in any case, which is precisely what must not be missed.
KV_RE = re.compile(
    r"(?<![\w/.-])([A-Za-z_][\w./-]*)\s*=\s*"
    r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf(?:inity)?))(?![\w.])",
    re.IGNORECASE,
)

# Lines worth keeping as `log.line` events, with the tag they get (first match wins).
NOTABLE = (
    ("oom", re.compile(r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED", re.IGNORECASE)),
    ("nccl", re.compile(r"\bNCCL\b.*(error|timeout|failure)|ncclInternalError|ncclSystemError", re.IGNORECASE)),
    ("file_not_found", re.compile(r"FileNotFoundError|No such file or directory")),
    ("killed", re.compile(r"^\s*Killed\s*$|\bKilled process\b")),
    ("traceback", re.compile(r"^Traceback \(most recent call last\)")),
    ("error", re.compile(r"^\w*(Error|Exception)\b[:\s]")),
)

MAX_LINE_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Notable:
    tag: str
    line: str


def parse_number(text: str) -> float | int:
    lowered = text.lower()
    if "nan" in lowered:
        return math.nan
    if "inf" in lowered:
        return -math.inf if lowered.startswith("-") else math.inf
    if any(c in lowered for c in ".e"):
        return float(text)
    return int(text)


def parse_metrics(line: str) -> dict[str, float | int]:
    """`step=120 loss=2.31 lr=3e-4` -> {'step': 120, 'loss': 2.31, 'lr': 0.0003}; {} when none."""
    if "=" not in line:
        return {}
    return {key: parse_number(value) for key, value in KV_RE.findall(line)}


def notable(line: str) -> Notable | None:
    for tag, pattern in NOTABLE:
        if pattern.search(line):
            return Notable(tag=tag, line=line[:MAX_LINE_CHARS])
    return None

"""Pure classification of notable log lines: the ones worth a `log.line` event, with a tag."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Lines worth keeping as `log.line` events, with the tag they get. The order is the priority: a
# traceback block takes the tag of its most specific line (an OOM beats a plain traceback).
NOTABLE = (
    ("oom", re.compile(r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED", re.IGNORECASE)),
    ("nccl", re.compile(r"\bNCCL\b.*(error|timeout|failure)|ncclInternalError|ncclSystemError", re.IGNORECASE)),
    ("file_not_found", re.compile(r"FileNotFoundError|No such file or directory")),
    ("killed", re.compile(r"^\s*Killed\s*$|\bKilled process\b")),
    # the fp16 loss scaler overflowing at its minimum: every step skipped (DeepSpeed, fairseq)
    (
        "loss_scale",
        re.compile(
            r"Attempted loss scale:\s*(\S+), reducing to \1\b|loss scale already at minimum"
            r"|Minimum loss scale reached"
        ),
    ),
    ("traceback", re.compile(r"^Traceback \(most recent call last\)")),
    ("error", re.compile(r"^\w*(Error|Exception)\b[:\s]")),
)
TAG_RANK = {tag: rank for rank, (tag, _) in enumerate(NOTABLE)}
# torchrun / elastic prefix every line of a worker with its rank: `[rank0]: Traceback ...`
RANK_PREFIX_RE = re.compile(r"^\[(?:rank|default)\d+\]:\s?")
# one cheap search says whether a line can be notable at all
ANY_NOTABLE_RE = re.compile(
    r"out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|NCCL|nccl|FileNotFoundError|No such file"
    r"|Killed|Traceback|Error|Exception|reducing to|loss scale",
    re.IGNORECASE,
)

MAX_LINE_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Notable:
    tag: str
    line: str


def strip_rank(line: str) -> str:
    return RANK_PREFIX_RE.sub("", line, count=1) if line.startswith("[") else line


def tag_of(line: str) -> str | None:
    if not ANY_NOTABLE_RE.search(line):
        return None
    line = strip_rank(line)
    for tag, pattern in NOTABLE:
        if pattern.search(line):
            return tag
    return None


def notable(line: str) -> Notable | None:
    tag = tag_of(line)
    return None if tag is None else Notable(tag=tag, line=line[:MAX_LINE_CHARS])


def strongest(tags: list[str]) -> str:
    """The most specific of several tags (oom > nccl > file_not_found > killed > loss_scale > traceback > error)."""
    return min(tags, key=TAG_RANK.__getitem__)

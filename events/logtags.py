"""The vocabulary of `log.line` tags: which lines of a training log are notable, and which report a fault.

The agent tags lines with it (agent/parse.py), and the policies' `log_pattern` rules name a tag
(`tag: oom`) instead of repeating a regex, so the patterns live here only. Every fault shape is one
that real trainers print (PyTorch, TensorFlow, the NCCL watchdog, torchrun, fairseq, DeepSpeed,
Megatron, DeiT/timm); the tests cite where each was seen.

The order of `NOTABLE` is the priority: a traceback block takes the tag of its most specific line
(an OOM beats the NCCL errors it causes on other ranks, both beat a plain traceback).
"""

from __future__ import annotations

import re

OOM, NCCL, ILLEGAL_MEMORY, NAN, KILLED = "oom", "nccl", "illegal_memory", "nan", "killed"
LOSS_SCALE = "loss_scale"
FILE_NOT_FOUND, TRACEBACK, ERROR = "file_not_found", "traceback", "error"

_OOM = (
    r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|CUDA error: out of memory"
    r"|OOM when allocating tensor|ResourceExhaustedError|RESOURCE_EXHAUSTED: Out of memory"
)
# the watchdog's lines (any torch version) and NCCL's own errors; not `[W ProcessGroupNCCL.cpp...]`
# warnings (a healthy run's exit prints one) nor NCCL_DEBUG=INFO lines that name NCCL_*_TIMEOUT
_NCCL = (
    r"Watchdog caught collective operation timeout|WorkNCCL\(SeqNum=|\[E[\d :.]*ProcessGroupNCCL\.cpp"
    r"|NCCL (?:error|timeout|communicator was aborted)|setting up NCCL communicator"
    r"|nccl(?:Internal|System|UnhandledCuda|Remote|InvalidUsage)Error"
)
_ILLEGAL_MEMORY = r"an illegal memory access was encountered|cudaErrorIllegalAddress|CUDA error: misaligned address"
# a framework's own NaN/Inf check that ends training (not DeepSpeed's start-up `OVERFLOW! ... Skipping step`)
_NAN = (
    r"FloatingPointError|Minimum loss scale reached|loss scale already at minimum|found NaN in"
    r"|Loss is nan, stopping training|NaN or Inf found in input tensor|returned nan values in its \d+th output"
)
# the fp16 loss scaler overflowing at its minimum, so every step is skipped (DeepSpeed prints it each step)
_LOSS_SCALE = r"Attempted loss scale:\s*(\S+), reducing to \1\b"
# the kernel's OOM killer or a crash: a bare `Killed` from the shell, a segfault, a child torchrun saw die
_KILLED = (
    r"^\s*Killed\s*$|\bKilled process\b|Segmentation fault|exitcode\s*:\s*-\d+|Signal \d+ \(SIG[A-Z]+\) received"
    r"|died with <Signals\.SIG"
)
NOTABLE: tuple[tuple[str, re.Pattern[str]], ...] = (
    (OOM, re.compile(_OOM, re.IGNORECASE)),
    (NCCL, re.compile(_NCCL)),
    (ILLEGAL_MEMORY, re.compile(_ILLEGAL_MEMORY)),
    (NAN, re.compile(_NAN)),
    (KILLED, re.compile(_KILLED)),
    (LOSS_SCALE, re.compile(_LOSS_SCALE)),
    (FILE_NOT_FOUND, re.compile(r"FileNotFoundError|No such file or directory")),
    (TRACEBACK, re.compile(r"^Traceback \(most recent call last\)")),
    (ERROR, re.compile(r"^\w*(Error|Exception)\b[:\s]")),
)
PATTERNS = dict(NOTABLE)
TAG_RANK = {tag: rank for rank, (tag, _) in enumerate(NOTABLE)}
# A line that reports one of these is a fault, whatever else it holds (`key=value` pairs included).
FAULTS = (OOM, NCCL, ILLEGAL_MEMORY, NAN, KILLED, LOSS_SCALE)
# One cheap search says whether a line can report a fault at all: a superset of the fault patterns in the
# casings trainers print, case-sensitive (a case-blind search of many alternatives costs ten times more).
_FAULT_HINTS = (
    r"out of memory|Out of memory|OutOfMemory|OOM when|RESOURCE_EXHAUSTED|ResourceExhausted|CUBLAS_STATUS_ALLOC"
    r"|NCCL|nccl|illegal memory|IllegalAddress|misaligned address|FloatingPointError|found NaN"
    r"|Minimum loss scale|loss scale already|Attempted loss scale"
    r"|Loss is nan|NaN or Inf|returned nan|Killed|Segmentation fault|exitcode|Signal \d|died with"
)
ANY_FAULT_RE = re.compile(_FAULT_HINTS)
# ... and whether it can be notable at all.
ANY_NOTABLE_RE = re.compile(_FAULT_HINTS + r"|FileNotFoundError|No such file|Traceback|Error|Exception")


def tag_of(line: str) -> str | None:
    """The tag of one line (prefixes such as `[rank3]:` already stripped), or None."""
    return match_tag(line) if ANY_NOTABLE_RE.search(line) else None


def match_tag(line: str) -> str | None:
    """`tag_of` for a line already known to pass `ANY_NOTABLE_RE` (no second pre-check)."""
    for tag, pattern in NOTABLE:
        if pattern.search(line):
            return tag
    return None


def may_be_fault(line: str) -> bool:
    """Cheap pre-check: False means the line reports no fault."""
    return ANY_FAULT_RE.search(line) is not None


def is_fault(tag: str | None) -> bool:
    return tag in FAULTS


def strongest(tags: list[str]) -> str:
    """The most specific of several tags (the order of `NOTABLE`)."""
    return min(tags, key=lambda tag: TAG_RANK.get(tag, len(TAG_RANK)))


def matching_line(text: str, regex: re.Pattern[str]) -> str | None:
    """The line of `text` (one line, or a traceback's lines) where `regex` matches first, or None.
    An anchored pattern (`^Traceback`) is tried on each line, as on a line of its own."""
    found = regex.search(text)
    if found is None:
        found = next((m for line in text.split("\n") if (m := regex.search(line))), None)
        return None if found is None else found.string
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.start())
    return text[start : len(text) if end < 0 else end]


def tagged_line(text: str, tag: str) -> str | None:
    """The line of `text` that earned it `tag` (the exception line of a traceback tagged oom, say); for a
    plain traceback, its exception line (`ValueError: ...`), which says more than `Traceback (most ...`."""
    if tag == TRACEBACK and (line := exception_line(text)) is not None:
        return line
    regex = PATTERNS.get(tag)
    return None if regex is None else matching_line(text, regex)


_NOT_EXCEPTION = ("Traceback (most recent call last)", "During handling of the above exception",
                  "The above exception was the direct cause", "... ")  # fmt: skip


def exception_line(text: str) -> str | None:
    """The last exception line of a traceback block: unindented, after the frames (agent/blocks.py)."""
    lines = text.split("\n")
    for line in reversed(lines[1:]):
        if line.strip() and not line[0].isspace() and not line.startswith(_NOT_EXCEPTION):
            return line
    return None

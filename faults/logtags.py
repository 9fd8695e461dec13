"""The vocabulary of `log.line` tags: which lines of a training log are notable, and which report a fault.

The agent tags lines with it (agent/parse.py), and the policies' `log_pattern` rules name a tag
(`tag: oom`) instead of repeating a regex, so the patterns live here only. The fault tags and their
patterns come from the catalogue of fault signatures (faults/), where each shape is declared
once with the framework source that prints it and real sample lines.

The order of `NOTABLE` is the priority: a traceback block takes the tag of its most specific line
(an ECC error or an OOM beats the NCCL errors it causes on other ranks, both beat a plain traceback).
"""

from __future__ import annotations

import re

from trainwarden.faults import REGISTRY, TAGS, tag_pattern
from trainwarden.faults.disk import DISK_FULL
from trainwarden.faults.distributed import CHILD_FAILED, GLOO, NCCL, NCCL_WARN
from trainwarden.faults.gpu import CUDA_ERROR, ECC, ILLEGAL_MEMORY, XID
from trainwarden.faults.hang import HANG
from trainwarden.faults.host import KILLED
from trainwarden.faults.memory import OOM
from trainwarden.faults.numeric import LOSS_SCALE, NAN

__all__ = ["CHILD_FAILED", "CUDA_ERROR", "DISK_FULL", "ECC", "ERROR", "FILE_NOT_FOUND", "GLOO", "HANG",
           "ILLEGAL_MEMORY", "KILLED", "LOSS_SCALE", "NAN", "NCCL", "NCCL_WARN", "OOM", "TRACEBACK", "XID"]  # fmt: skip

# The tags of notable lines that are no fault: the fault tags are each declared once, by their family.
FILE_NOT_FOUND, TRACEBACK, ERROR = "file_not_found", "traceback", "error"

# A line that reports one of these is a fault, whatever else it holds (`key=value` pairs included).
FAULTS = TAGS
NOTABLE: tuple[tuple[str, re.Pattern[str]], ...] = (
    *((tag, re.compile(tag_pattern(tag))) for tag in FAULTS),
    (FILE_NOT_FOUND, re.compile(r"FileNotFoundError|No such file or directory")),
    (TRACEBACK, re.compile(r"^Traceback \(most recent call last\)")),
    (ERROR, re.compile(r"^\w*(Error|Exception)\b[:\s]")),
)
PATTERNS = dict(NOTABLE)
TAG_RANK = {tag: rank for rank, (tag, _) in enumerate(NOTABLE)}
# One cheap search says whether a line can report a fault at all: the literal hints every signature declares
# (case-sensitive: a case-blind search of many alternatives costs ten times more).
_FAULT_HINTS = "|".join(sorted({re.escape(hint) for s in REGISTRY for hint in s.hints}, key=len, reverse=True))
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

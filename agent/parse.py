"""Pure classification of notable log lines: the ones worth a `log.line` event, with a tag.

The tags and their patterns are the events' vocabulary (events/logtags.py), shared with the
policies' `log_pattern` rules; here they meet the prefixes that hide them (`[rank3]:`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainwarden.events import logtags
from trainwarden.events.logtags import NOTABLE, TAG_RANK, strongest

__all__ = ["MAX_LINE_CHARS", "NOTABLE", "TAG_RANK", "Notable", "fault_of", "notable", "strip_rank", "strongest",
           "tag_of"]  # fmt: skip

# torchrun / elastic prefix every line of a worker with its rank: `[rank0]: Traceback ...`
RANK_PREFIX_RE = re.compile(r"^\[(?:rank|default)\d+\]:\s?")

MAX_LINE_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Notable:
    tag: str
    line: str


def strip_rank(line: str) -> str:
    return RANK_PREFIX_RE.sub("", line, count=1) if line.startswith("[") else line


def tag_of(line: str) -> str | None:
    if not logtags.ANY_NOTABLE_RE.search(line):
        return None
    return logtags.tag_of(strip_rank(line))


def fault_of(line: str) -> str | None:
    """The fault a line reports (oom, nccl, ...), or None; one precompiled search for most lines."""
    if not logtags.may_be_fault(line):
        return None
    tag = logtags.tag_of(strip_rank(line))
    return tag if logtags.is_fault(tag) else None


def notable(line: str) -> Notable | None:
    tag = tag_of(line)
    return None if tag is None else Notable(tag=tag, line=line[:MAX_LINE_CHARS])

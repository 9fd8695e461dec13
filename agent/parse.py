"""Pure classification of notable log lines: the ones worth a `log.line` event, with a tag.

The tags and their patterns are the events' vocabulary (faults/logtags.py), shared with the
policies' `log_pattern` rules; here they meet the prefixes that hide them (`[rank3]:`, timestamps,
logger names: agent/prefixes.py). A line is matched without its prefixes first, then as printed,
since a prefix can itself be the telling part (`[E626 ...ProcessGroupNCCL.cpp:1785]`).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainwarden.agent.prefixes import strip_prefix
from trainwarden.faults import logtags
from trainwarden.faults.logtags import strongest

__all__ = ["MAX_LINE_CHARS", "Notable", "fault_of", "notable", "strongest", "tag_of"]

MAX_LINE_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Notable:
    tag: str
    line: str


def _tag(line: str) -> str | None:
    """The tag of a line that passed a pre-check: without its prefixes, else as printed."""
    bare = strip_prefix(line)
    tag = logtags.tag_of(bare) if bare is not line else logtags.match_tag(line)
    return logtags.match_tag(line) if tag is None and bare is not line else tag


def tag_of(line: str) -> str | None:
    if not logtags.ANY_NOTABLE_RE.search(line):
        return None
    return _tag(line)


def fault_of(line: str) -> str | None:
    """The fault a line reports (oom, nccl, ...), or None; one precompiled search for most lines."""
    if not logtags.may_be_fault(line):
        return None
    tag = _tag(line)
    return tag if logtags.is_fault(tag) else None


def notable(line: str) -> Notable | None:
    tag = tag_of(line)
    return None if tag is None else Notable(tag=tag, line=line[:MAX_LINE_CHARS])

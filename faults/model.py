"""What one fault signature declares: the shape of the line, what it means, where it comes from.

A signature is one line a framework prints when it fails (PyTorch's CPU allocator, the NCCL watchdog,
the kernel's `NVRM: Xid`), declared once with the source file and string it comes from, the words a
person needs, a remedy, and sample lines that the tests run through the agent's tagging and these
words (tests/unit/test_signatures.py). The `tag` groups signatures for the policies' `log_pattern`
rules (`tag: oom`); the `stage` says where in a failure it stands, so that a follow-on (torchrun's
SIGTERM of the other ranks, the watchdog after an ECC error) folds into the cause seen before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

# Where a line stands in a failure. A later stage folds into an open fault of an earlier one.
CAUSE = 0  # a fault of its own: out of memory, an ECC error, a segfault, a full disk
UNEXPLAINED = 1  # a traceback no signature explains: the cause when nothing came before it
COLLECTIVE = 2  # a collective timed out or failed: what the other ranks see of one rank's fault
TEARDOWN = 3  # the launcher taking the job down: SIGTERM to the other ranks, ChildFailedError
STAGES = {CAUSE: "cause", UNEXPLAINED: "unexplained", COLLECTIVE: "collective", TEARDOWN: "teardown"}

FORMAT = "built from the source's format string"  # a sample no public log was found for

Describe = Callable[[str], "str | None"]


@dataclass(frozen=True, slots=True)
class Source:
    """Where the line is printed: a file of a public repository and the format string in it."""

    repo: str  # owner/name on GitHub, or the vendor site whose catalogue it is (docs.nvidia.com)
    path: str
    string: str  # the format string as the file spells it (its literal part)

    def cite(self) -> str:
        return f"{self.repo} {self.path}: {self.string!r}"


@dataclass(frozen=True, slots=True)
class Sample:
    """A line as a real run printed it, and the words it must give (None: the signature's `what`)."""

    line: str
    said: str | None = None
    seen: str = ""  # where this exact line was seen: a public issue, or the real library that printed it here


@dataclass(frozen=True, slots=True)
class Signature:
    id: str
    tag: str  # the log.line tag (faults/logtags.py); policies name it
    pattern: str  # searched in the line, its prefixes stripped; no named groups (tags join their patterns)
    hints: tuple[str, ...]  # literal substrings, one of which every matching line holds (the cheap pre-check)
    severity: str  # info | warning | critical
    what: str  # the fault in words when the line says no more (`out of memory (host)`)
    remedy: str
    source: Source
    samples: tuple[Sample, ...]
    describe: Describe | None = None  # the specifics the line holds, in words; None: `what`
    stage: int = CAUSE
    ignore_case: bool = False
    not_samples: tuple[str, ...] = ()  # real lines that look alike and must not match
    context: tuple[tuple[str, str], ...] = ()  # (regex, words): added when the whole event (a traceback) matches
    regex: re.Pattern[str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern, re.IGNORECASE if self.ignore_case else 0))

    @property
    def scoped(self) -> str:
        """The pattern with its own flags, to be joined with others'."""
        return f"(?i:{self.pattern})" if self.ignore_case else f"(?:{self.pattern})"

    def words(self, line: str, text: str = "") -> str:
        """The fault in the few words a message needs, from the line that matched and the event it is in
        (a traceback's frames say where it happened: `at a checkpoint save`)."""
        said = (self.describe(line) if self.describe is not None else None) or self.what
        where = next((more for regex, more in self.context if re.search(regex, text or line)), "")
        return said + where


# --- shared helpers of the describe functions --------------------------------------------------------

_SIZES = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def size_words(n: int) -> str:
    """Bytes as a person reads them: 4611686018427387904 -> '4.00 EiB'."""
    value, unit = float(n), 0
    while value >= 1024 and unit < len(_SIZES) - 1:
        value, unit = value / 1024, unit + 1
    return f"{int(value)} B" if unit == 0 else f"{value:.2f} {_SIZES[unit]}"


_RANK = re.compile(r"^\s*\[(?:rank|Rank )(\d+)\]|\[Rank (\d+)\]|\bon rank (\d+)\b")


def rank_of(line: str) -> str | None:
    """The rank a line names (`[rank3]:`, `[Rank 3]`, `on rank 3`), or None."""
    found = _RANK.search(line)
    return None if found is None else next(g for g in found.groups() if g is not None)


def on_rank(line: str) -> str:
    rank = rank_of(line)
    return "" if rank is None else f" on rank {rank}"

"""What the structured metric readers (CSV loggers, `trainer_state.json`, TensorBoard events) share.

Each reader is a pure decoder plus a thin incremental reader, like the W&B run-file reader: `poll()`
returns the records that became complete since the last poll, each numbered so that reading the
same file again yields the same numbers (the event's seq), and `offset` is where a restarted agent
resumes (saved in the agent's state as a log position).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from trainwarden.core.metrics import value_problem


@dataclass(frozen=True, slots=True)
class Record:
    """One row / entry / event of a metric file, numbered for its event."""

    source: str  # `csv`, `hfstate`, `tb`: the producer is `<host>/<source>/<run>[/<sub>]`
    sub: str  # what else numbers it: `g<generation>` (CSV), the file (TensorBoard), or ""
    seq: int  # row number, entry number, or file offset past the record: stable across re-reads
    start: int  # where a restarted agent would resume to read it again (the reader's `offset` unit)
    metrics: dict[str, float | int]
    step: int | None
    ts: float | None = None  # when the trainer wrote it, where the file says (TensorBoard's wall time)


class Reader(Protocol):
    """An incremental reader of one run's metric file (or TensorBoard run directory)."""

    offset: int
    generation: int
    inode: int | None

    @property
    def exists(self) -> bool: ...

    @property
    def progress(self) -> int:
        """How far it has read, all files together: unchanged after a poll means nothing new."""
        ...

    def poll(self) -> list[Record]: ...


def whole_step(value: object) -> int | None:
    """`value` as a step (a whole number >= 0: `3`, `3.0`), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value_problem("step", value) is not None:
        return None
    return int(value)


def number(text: str) -> float | int | None:
    """A cell's text as a number (`12`, `0.5`, `nan`, `inf`), or None (empty, a word, a date)."""
    text = text.strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None

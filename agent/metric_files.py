"""Which reader a watched path gets, and structured metric files as the agent's log items.

The rule, by name, then by content:

| path | read as |
|---|---|
| `*.csv` | a CSV metric logger (`agent.csv_metrics`: Lightning, ultralytics, timm) |
| `*trainer_state.json` | Hugging Face Trainer state (`agent.hf_state`), newest `checkpoint-*/` copy included |
| `*events.out.tfevents*`, a directory | TensorBoard events (`agent.tfevents`); not a directory named `*.log` |
| anything else whose first line is a CSV metric header | a CSV metric logger (Keras `CSVLogger('training.log')`) |
| anything else | a training log, line by line (`agent.logsource`) |

The content decides the last two: a file with no whole first line yet is `undecided`, and the watcher looks
again until it has one (Keras writes its header at the end of the first epoch).

Producers and seqs of the metric events (stable across re-reads, like the log's):

| file | producer | seq |
|---|---|---|
| CSV | `<host>/csv/<run>/g<generation>` | data row number (from 1) |
| trainer_state.json | `<host>/hfstate/<run>` | `log_history` index + 1 |
| TensorBoard | `<host>/tb/<run>/<file, relative to the run directory>` | byte offset past the record |
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

from trainwarden.agent import access
from trainwarden.agent.csv_metrics import CsvFile, first_line, is_header
from trainwarden.agent.hf_state import TrainerState
from trainwarden.agent.isolation import SourceErrors
from trainwarden.agent.logsource import Item
from trainwarden.agent.structured import Reader, Record
from trainwarden.agent.tfevents import PREFIX, EventFiles
from trainwarden.core.metrics import normalise, without_problems
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event

LOG, CSV, HF_STATE, TENSORBOARD = "log", "csv", "trainer_state", "tensorboard"
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")  # a directory named so is a log path gone wrong, not a run dir
READERS: dict[str, type[CsvFile] | type[TrainerState] | type[EventFiles]] = {
    CSV: CsvFile,
    HF_STATE: TrainerState,
    TENSORBOARD: EventFiles,
}


def kind_of(path: Path) -> str:
    """How a watched path is read (the table above)."""
    kind = _by_name(path)
    if kind != LOG:
        return kind
    head = first_line(path)
    return CSV if head is not None and is_header(head) else LOG


def undecided(path: Path) -> bool:
    """Whether a path read as a log may still turn out to be a CSV metric file: it has no whole first line yet."""
    return _by_name(path) == LOG and not access.is_dir(path) and first_line(path) is None


def _by_name(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".csv"):
        return CSV
    if name.endswith("trainer_state.json"):
        return HF_STATE
    if PREFIX in name or (access.is_dir(path) and not name.endswith(LOG_SUFFIXES)):
        return TENSORBOARD
    return LOG


def open_reader(path: Path, *, offset: int = 0, generation: int = 0, inode: int | None = None) -> Reader:
    kind = kind_of(path)
    if kind == LOG:
        raise ValueError(f"{path} is a log, not a metric file")
    reader: Reader = READERS[kind](path, offset=offset, generation=generation, inode=inode)
    return reader


def record_event(record: Record, *, run: str, host: str, ts: float) -> tuple[Event | None, list[str]]:
    """Pure: a record as a metric event under canonical names (None when no value is usable), and the
    problems of the values left out."""
    data, refused = without_problems(normalise(record.metrics))
    if record.step is not None:
        data["step"] = record.step  # the file's own position wins over a column that maps to `step`
    if not data or set(data) <= {"step", "epoch"}:
        return None, refused
    producer = f"{host}/{record.source}/{run}" + (f"/{record.sub}" if record.sub else "")
    return make_event(t.METRIC, run=run, host=host, producer=producer, seq=record.seq, data=data, ts=ts), refused


class MetricFileLog:
    """A structured metric file in the place of a run's log: its records as the log's metric items."""

    def __init__(self, *, run: str, host: str, reader: Reader, errors: SourceErrors | None = None) -> None:
        self.run = run
        self.host = host
        self.tail = reader
        self.errors = errors or SourceErrors()
        self.last_line_at: float | None = None
        self.lines_read = 0
        self.behind = False  # the last poll found records: poll again at once (a reader reads a chunk at a time)

    @property
    def safe_offset(self) -> int:
        return self.tail.offset

    def poll(self, now: float) -> list[Item]:
        records = self.tail.poll()
        self.behind = bool(records)
        out: list[Item] = []
        for record in records:
            ts = record.ts if record.ts and math.isfinite(record.ts) else now
            event, refused = record_event(record, run=self.run, host=self.host, ts=ts)
            if refused:
                self.errors.refused_values(f"{self.run} metrics file", refused)
            if event is not None:
                out.append(Item(event, record.start, self.tail.generation, True, tuple(refused)))
        if records:
            self.last_line_at = now
            self.lines_read += len(records)
        return out

    def finish(self, now: float) -> list[Item]:
        return []  # records are whole when read: nothing is pending


def metric_file_events(path: Path, *, run: str, host: str = "backtest", interval: float = 10.0) -> Iterator[Event]:
    """A finished (or still growing) metric file's records as metric events, offline (backtest):
    at their own time where the file has one (TensorBoard), else `interval` s apart."""
    reader = open_reader(path)
    clock = 0.0
    while True:
        before = reader.progress
        records = reader.poll()
        if not records and reader.progress == before:
            return
        for record in records:
            event, _ = record_event(record, run=run, host=host, ts=record.ts if record.ts else clock)
            if event is not None:
                yield event
                clock += interval

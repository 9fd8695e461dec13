"""CSV metric loggers, followed as they grow: Lightning `CSVLogger` (`metrics.csv`), ultralytics
`results.csv`, timm `summary.csv`, Keras `CSVLogger` (under any name: `training.log`), and any CSV with a
header row of metric names.

Shapes read (one header row, then one row per log call):

    epoch,step,test_loss,train_loss,val_accuracy,val_loss          Lightning: sparse, train and val
    0,49,,0.634955883026123,,                                      rows interleave, empty cells
    0,1718,,,0.9761999845504761,0.07106363773345947                are no value
    epoch,         train/box_loss,  ...,   val/box_loss, lr/pg0   ultralytics: padded names
    epoch,train_loss,eval_loss,eval_top1,eval_top5,lr              timm: one row per epoch

The step is the `step` column; without one, the `epoch` column (ultralytics, timm). A row holding
nothing but its position is not a metric.

Rows are numbered from 1 (the event's seq): Lightning rewrites the whole file with a wider header
when a new metric name appears, and row N is still row N after that. A row cut mid-write (no line
end yet) waits for the next poll. A file that shrinks, or a new file at the path, is a new
generation, numbered from 1 again.
"""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path
from typing import BinaryIO

from trainwarden.agent import access
from trainwarden.agent.structured import Record, number, whole_step
from trainwarden.agent.tail import open_if_changed
from trainwarden.core.metrics import canonical, is_known

READ_CHUNK = 1 << 20
MAX_HEADER = 1 << 16  # a header longer than this is not a metric logger's
POSITIONS = ("step", "epoch")


def header_names(line: str) -> list[str]:
    """Pure: a header row's column names, padding stripped (ultralytics pads them to a width)."""
    return [name.strip() for name in next(csv.reader([line]), [])]


# a column name: a word, perhaps with a logger's separators (`train/box_loss`, `metrics/mAP50-95(B)`, `lr/pg0`)
COLUMN_RE = re.compile(r"[A-Za-z_][\w./()@%:+-]*")


def is_header(line: str) -> bool:
    """Pure: whether a file's first line is a CSV metric logger's header, whatever the file is named: Keras'
    `CSVLogger('training.log')` (its documentation's own example) writes `epoch,accuracy,loss,val_accuracy,val_loss`.
    Two names or more, each one word, one of them a position (`epoch`, `step`) or a metric the vocabulary knows;
    a log's first line (`Epoch 1, loss 0.5`, `INFO:root:start`) is none."""
    line = line.rstrip("\r\n")
    if "\r" in line or "\x00" in line:  # a bar redrawn with `\r`, a NUL: a console's line, not a header
        return False
    names = header_names(line)
    if len(names) < 2 or not all(COLUMN_RE.fullmatch(name) for name in names):
        return False
    return any(name.lower() in POSITIONS or is_known(canonical(name)) for name in names)


def first_line(path: Path) -> str | None:
    """The file's first line when it is whole; None when there is none yet (no file, an empty one, a header still
    being written) or the file cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.readline(MAX_HEADER)
    except (OSError, ValueError):
        return None
    return head.decode("utf-8", "replace") if head.endswith(b"\n") else None


def row_record(names: list[str], line: str, *, sub: str, seq: int, start: int) -> Record | None:
    """Pure: one data row as a record, or None when it holds no metric (blank, or positions only)."""
    cells = next(csv.reader([line]), [])
    metrics: dict[str, float | int] = {}
    for name, cell in zip(names, cells, strict=False):
        value = number(cell)
        if name and value is not None and name not in metrics:
            metrics[name] = value
    if not any(name not in POSITIONS for name in metrics):
        return None
    step = whole_step(metrics["step"]) if "step" in metrics else whole_step(metrics.get("epoch"))
    return Record("csv", sub, seq, start, metrics, step)


class CsvFile:
    """Incremental reader of one CSV metric file; `offset` is the byte offset past the last row read."""

    def __init__(self, path: Path, *, offset: int = 0, generation: int = 0, inode: int | None = None) -> None:
        self.path = Path(path)
        self.offset = offset
        self.generation = generation
        self.inode = inode
        self.rows = 0  # data rows (lines after the header) before `offset`
        self._header: bytes | None = None  # the header row as read, with its line end
        self._names: list[str] = []

    @property
    def exists(self) -> bool:
        return access.exists(self.path)

    @property
    def progress(self) -> int:
        return self.offset

    def poll(self, *, max_bytes: int = READ_CHUNK) -> list[Record]:
        # without a header read yet, the file is opened whatever its size
        f = open_if_changed(self.path, inode=self.inode if self._header is not None else None, offset=self.offset)
        if f is None:
            return []
        with f:
            st = os.fstat(f.fileno())
            if self.inode is not None and st.st_ino != self.inode:
                self._restart()  # another file at the path: a new run
            self.inode = st.st_ino
            head = f.readline(MAX_HEADER)
            if not head.endswith(b"\n"):
                return []  # the header is still being written (or rewritten)
            if head == self._header and st.st_size < self.offset:
                self._restart()  # the same header over fewer rows: the file was started again
            if head != self._header:
                found = self._take_header(f, head)
                if found is None:
                    return []  # rewritten wider, and not yet as far as we had read: wait for it
                if not found:
                    self._restart()
                    self._take_header(f, head)
            f.seek(self.offset)
            return self._rows(f.read(max_bytes))

    def _restart(self) -> None:
        self.offset, self.rows, self._header = 0, 0, None
        self.generation += 1

    def _take_header(self, f: BinaryIO, head: bytes) -> bool | None:
        """A header row seen first, or a new one: where do the rows already read end in the file as it
        is now? A wider header over the same rows is Lightning rewriting the file when a metric name
        appears (None while the rewrite has not reached the rows read); any other header is a new
        file (False)."""
        names = header_names(head.decode("utf-8", "replace"))
        if self._header is None:
            self._header, self._names = head, names
            if self.offset <= len(head):
                self.offset, self.rows = len(head), 0
            else:  # resuming at a saved offset after a restart: count the rows before it
                f.seek(len(head))
                self.rows = f.read(self.offset - len(head)).count(b"\n")
            return True
        if not set(self._names) <= set(names):
            return False
        f.seek(len(head))
        pos, seen = len(head), 0
        while seen < self.rows:
            line = f.readline()
            if not line.endswith(b"\n"):
                return None
            pos, seen = pos + len(line), seen + 1
        self._header, self._names, self.offset = head, names, pos
        return True

    def _rows(self, data: bytes) -> list[Record]:
        out: list[Record] = []
        pos = self.offset
        sub = f"g{self.generation}"
        i = 0
        while (nl := data.find(b"\n", i)) >= 0:  # a row without its line end yet is cut mid-write: later
            raw, i = data[i : nl + 1], nl + 1
            self.rows += 1
            record = row_record(self._names, raw.decode("utf-8", "replace").rstrip("\r\n"), sub=sub,
                                seq=self.rows, start=pos)  # fmt: skip
            if record is not None:
                out.append(record)
            pos += len(raw)
        self.offset = pos
        return out

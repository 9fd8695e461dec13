"""Pure: metrics printed as tables over several lines, which no one-line format can read.

* **A box of `| name | value |` rows** between two dashed lines: stable-baselines3's and OpenAI baselines'
  logger (`|    loss                 | 6.21        |`, group rows `| train/ |  |` prefixing the indented names
  under them: `train/loss`). The rows are one sample: the box's values are published when its closing
  dashed line comes, all at one position.
* **Rows of `name | train | validation`** under a `Training | Validation` header: AllenNLP's epoch summary
  (`loss          |     0.245  |     0.507`); each row is one sample, its second value named `val_<name>`.
* **A header of names, then rows of numbers** in the same columns: fastai's `epoch  train_loss  valid_loss
  accuracy  time` then `0  0.693147  0.693100  0.500000  00:03`, a TSV of scores (`steps\tepisodes\tmean`).
  A header counts when every cell is a name and one names a measurement (`events.metrics.is_known`); a row
  counts when it has as many cells, each a number or a clock time (`00:03`, left out).

`Tables` holds one run's state (the open box, the last header); it reads only lines the one-line formats
found no metric in, so a line of pairs is never taken for a row.
"""

from __future__ import annotations

import re

from trainwarden.agent.pairs import NUM, PROSE, Metrics, numbers
from trainwarden.core.metrics import canonical, is_known

MAX_BOX_ROWS = 200  # rows one box may hold; a longer run of `|` lines is not a logger's box
BOX_RULE_RE = re.compile(r"^\s*-{8,}\s*$")
BOX_ROW_RE = re.compile(r"^\s*\|( *)([^|]*?)\s*\|\s*([^|]*?)\s*\|\s*$")
NUMBER_RE = re.compile(rf"^{NUM}$", re.IGNORECASE)
CLOCK_RE = re.compile(r"^\d{1,3}:\d{2}(?::\d{2})?$")
SPLIT_HEADER_RE = re.compile(r"^\s*Training\s*\|\s*Validation\s*$")
SPLIT_ROW_RE = re.compile(rf"^\s*([A-Za-z_][\w./@%-]*)\s*\|\s*({NUM}|N/A)\s*\|\s*({NUM}|N/A)\s*$", re.IGNORECASE)
NAME_RE = re.compile(r"^[A-Za-z_][\w./@%-]*$")
MAX_COLUMNS = 40


class Tables:
    """One run's multi-line tables (see the module docstring)."""

    __slots__ = ("_box", "_group", "_header", "_split")

    def __init__(self) -> None:
        self._box: list[tuple[str, str]] | None = None  # the open box's (name, value) rows
        self._group = ""  # the box's current group (`train/`)
        self._header: tuple[str, ...] | None = None  # the last header's names, one per column
        self._split = False  # under a `Training | Validation` header

    def read(self, line: str) -> Metrics:
        """The metrics a table line completes: a box's values at its closing rule, a row's under its header."""
        if BOX_RULE_RE.match(line):
            return self._close_box()
        if "|" in line:
            if (row := BOX_ROW_RE.match(line)) is not None:
                self._box_row(*row.groups())
                return {}
            if SPLIT_HEADER_RE.match(line):
                self._split = True
                return {}
            if self._split and (split := SPLIT_ROW_RE.match(line)) is not None:
                name, train, held_out = split.groups()
                return numbers([(n, v) for n, v in ((name, train), (f"val_{name}", held_out)) if v != "N/A"])
        self._box, self._split = None, False  # anything else ends an open box (unread) or a split table
        return self._column_row(line)

    def _close_box(self) -> Metrics:
        rows, self._box, self._group = self._box, [], ""
        if not rows:
            return {}  # the opening rule
        return numbers(rows)

    def _box_row(self, indent: str, name: str, value: str) -> None:
        if self._box is None or len(self._box) >= MAX_BOX_ROWS:
            return  # a `|` line outside a box (a markdown table): not a logger's
        if not value:
            self._group = name if name.endswith("/") else f"{name}/"  # `| train/ |  |`: the names under it
            return
        if NAME_RE.match(name) and NUMBER_RE.match(value):
            self._box.append((f"{self._group}{name}" if indent and self._group else name, value))

    def _column_row(self, line: str) -> Metrics:
        cells = line.split()
        if not 2 <= len(cells) <= MAX_COLUMNS:
            return {}
        if all(NAME_RE.match(c) for c in cells):
            if PROSE.isdisjoint(c.lower() for c in cells) and any(is_known(canonical(c)) for c in cells):
                self._header = tuple(cells)
            return {}
        header = self._header
        if header is None or len(cells) != len(header):
            return {}
        pairs = []
        for name, cell in zip(header, cells, strict=True):
            if NUMBER_RE.match(cell):
                pairs.append((name, cell))
            elif not CLOCK_RE.match(cell):
                return {}  # a word where a number belongs: not a row of this table
        return numbers(pairs)

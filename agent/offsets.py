"""Where each watched log was read up to, saved after every successful flush.

Losing this file costs nothing but re-reading: event seqs come from byte offsets, so lines read
again produce the same event ids and the store drops them as duplicates.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Position:
    offset: int = 0
    generation: int = 0


def load(path: Path | None) -> dict[str, Position]:
    if path is None or not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text())
        return {run: Position(**pos) for run, pos in raw.items()}
    except (ValueError, TypeError):
        # A torn or foreign file: start over from the beginning of each log (safe, see above).
        return {}


def save(path: Path | None, positions: dict[str, Position]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({run: asdict(pos) for run, pos in positions.items()}))
    os.replace(tmp, path)

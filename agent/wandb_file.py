"""Read a W&B run's transaction log (`run-<id>.wandb`), which may still be being written.

Layout (the LevelDB log format): a 7-byte header `:W&B` + 0xBEE1 (little-endian) + version 0,
then 32 KiB blocks of records. Each record has a 7-byte header -- CRC-32 (zlib, seeded with the
CRC of the type byte), length (u16), type (1 FULL, 2 FIRST, 3 MIDDLE, 4 LAST) -- and its bytes; a
block tail too short for a header is padding. A logical record is one protobuf `Record` from
`wandb.proto.wandb_internal_pb2` (history, summary, run, exit, ...).

Reading stops at the first incomplete record and resumes there later, so a file still being
written is read as far as it is complete. A checksum mismatch in a complete record is corruption:
WandbFileError names the offset.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainwarden.agent.errors import WandbFileError, WandbUnavailable
from trainwarden.core.jsonload import float_literal, loads
from trainwarden.core.metrics import value_problem

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32768
RECORD_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
READ_CHUNK = 4 << 20
_TYPE_CRC = [zlib.crc32(bytes([i])) for i in range(5)]


def frames(data: bytes, base: int) -> tuple[list[tuple[int, bytes]], int]:
    """Pure: the complete logical records in `data`, which starts at file offset `base` (past the
    header), as (offset just past the record, payload); and the offset to resume from."""
    records: list[tuple[int, bytes]] = []
    parts: list[bytes] = []
    pos, i, resume = base, 0, base
    n = len(data)
    while True:
        left = BLOCK - pos % BLOCK
        if left < RECORD_HEADER:
            if i + left > n:
                break
            pos, i = pos + left, i + left
            continue
        if i + RECORD_HEADER > n:
            break
        crc, length, kind = struct.unpack_from("<IHB", data, i)
        if kind == 0 and length == 0:
            break  # zeros past the end of what was written
        if i + RECORD_HEADER + length > n:
            break
        payload = data[i + RECORD_HEADER : i + RECORD_HEADER + length]
        if kind > LAST or zlib.crc32(payload, _TYPE_CRC[kind]) != crc:
            raise WandbFileError(f"corrupt W&B record at byte {pos} (type {kind}, length {length}, checksum mismatch)")
        pos, i = pos + RECORD_HEADER + length, i + RECORD_HEADER + length
        if kind == FULL:
            records.append((pos, payload))
            resume, parts = pos, []
        elif kind == FIRST:
            parts = [payload]
        elif kind == MIDDLE:
            parts.append(payload)
        else:
            records.append((pos, b"".join((*parts, payload))))
            resume, parts = pos, []
    return records, resume


@dataclass(frozen=True, slots=True)
class History:
    end: int  # file offset just past the record: numbers its event
    metrics: dict[str, float | int]
    ts: float | None  # `_timestamp`: when the training process logged it
    step: int | None  # `_step`


@dataclass(frozen=True, slots=True)
class RunInfo:
    run_id: str
    entity: str
    project: str
    name: str


@dataclass(frozen=True, slots=True)
class Exit:
    exit_code: int


@dataclass(slots=True)
class Decoded:
    history: list[History] = field(default_factory=list)
    info: RunInfo | None = None
    exit: Exit | None = None


def _pb2() -> Any:
    try:
        from wandb.proto import wandb_internal_pb2
    except ImportError as exc:
        raise WandbUnavailable(
            f"reading W&B run files needs the wandb package ({exc}); install it with: pip install 'trainwarden[wandb]'"
        ) from exc
    return wandb_internal_pb2


def _value(item: Any) -> Any:
    if item.value_json:
        try:
            return loads(item.value_json, parse_float=float_literal)
        except ValueError:  # nested too deep, or a numeral that overflows: not a value the agent can use
            return None
    kind = item.WhichOneof("value")  # the typed values newer writers may use instead of JSON
    return getattr(item, kind) if kind in ("integer", "number") else None


def decode(records: list[tuple[int, bytes]]) -> Decoded:
    """Protobuf records -> numeric history rows, the run's identity and its exit, in file order."""
    pb = _pb2()
    out = Decoded()
    for end, payload in records:
        record = pb.Record.FromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "history":
            metrics: dict[str, float | int] = {}
            for item in record.history.item:
                value = _value(item)
                if type(value) in (int, float):
                    metrics[item.key or "/".join(item.nested_key)] = value
            ts = metrics.pop("_timestamp", None)
            step = metrics.pop("_step", None)
            metrics = {k: v for k, v in metrics.items() if not k.startswith("_")}
            if step is not None and value_problem("step", step) is not None:
                step = None
            out.history.append(History(end, metrics, None if ts is None else float(ts),
                                       None if step is None else int(step)))  # fmt: skip
        elif kind == "run":
            r = record.run
            out.info = RunInfo(run_id=r.run_id, entity=r.entity, project=r.project, name=r.display_name)
        elif kind == "exit":
            out.exit = Exit(record.exit.exit_code)
    return out


class RunFile:
    """Incremental reader of one `run-<id>.wandb` file."""

    def __init__(self, path: Path, *, offset: int = 0) -> None:
        self.path = Path(path)
        self.offset = offset

    def poll(self, *, max_bytes: int = READ_CHUNK) -> Decoded:
        with open(self.path, "rb") as f:
            if self.offset < len(HEADER):
                head = f.read(len(HEADER))
                if len(head) < len(HEADER):
                    return Decoded()
                if head != HEADER:
                    raise WandbFileError(f"{self.path} is not a W&B transaction log (header {head!r})")
                self.offset = len(HEADER)
            while True:
                f.seek(self.offset)
                data = f.read(max_bytes)
                records, resume = frames(data, self.offset)
                if records or len(data) < max_bytes:
                    break
                max_bytes *= 2  # one record longer than the chunk: read more rather than stall
        self.offset = resume
        return decode(records)

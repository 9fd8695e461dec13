"""TensorBoard event files (`events.out.tfevents.*`), followed as the writer appends to them.

The file is a sequence of TFRecords: length (u64), masked CRC-32C of the length, the serialized
`Event` protobuf, masked CRC-32C of it. Records are framed here, so that each has its byte offset
(the event's seq, and where a restarted agent resumes) and a record cut mid-write waits for the
next poll without holding the file open; the records themselves are checked and decoded by the
`tensorboard` package (`trainwarden[tensorboard]`): its CRC-32C, its `Event` protobuf and its
tensor decoding.

Scalars are read in both shapes writers use: `simple_value` (PyTorch's SummaryWriter, TF1) and
0-d numeric tensors (TF2 / Keras `tf.summary.scalar`); images, histograms, text and hparams are
skipped. The values of one record make one record here, at the `Event`'s `step` and `wall_time`.

A run directory is read file by file (every `events.out.tfevents.*` below it); a file in a
sub-directory has its tags prefixed with that directory (Keras writes `epoch_loss` in `train/`
and in `validation/`: read as `train/epoch_loss`, `validation/epoch_loss`).
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import Any

from trainwarden.agent.access import exists as reachable
from trainwarden.agent.access import is_dir
from trainwarden.agent.errors import MetricFileError
from trainwarden.agent.structured import Record, whole_step

PREFIX = "events.out.tfevents"  # in every event file's name
READ_CHUNK = 4 << 20
HEADER = 12  # length (8) + its CRC (4)
CHECKED_BYTES = 1 << 16  # records up to this size have their data CRC checked (the pure-Python CRC is slow)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.@/+-]")


def _tb() -> tuple[Any, Any, Any]:
    try:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
        from tensorboard.util import tensor_util
    except ImportError as exc:
        raise MetricFileError(
            f"reading TensorBoard event files needs the tensorboard package ({exc}); "
            "install it with: pip install 'trainwarden[tensorboard]'"
        ) from exc
    return event_pb2, masked_crc32c, tensor_util


def frames(data: bytes, base: int, *, name: str = "") -> tuple[list[tuple[int, int, bytes]], int]:
    """Pure: the complete records in `data` (which starts at file offset `base`) as (start, end,
    payload), and the offset to resume from. A bad length checksum is corruption: MetricFileError."""
    _, crc, _ = _tb()
    out: list[tuple[int, int, bytes]] = []
    i = 0
    while i + HEADER <= len(data):
        head = data[i : i + 8]
        (length,) = struct.unpack("<Q", head)
        if struct.unpack_from("<I", data, i + 8)[0] != crc(head):
            raise MetricFileError(f"{name or 'TensorBoard file'}: corrupt record at byte {base + i} (length checksum)")
        end = i + HEADER + length + 4
        if end > len(data):
            break
        payload = data[i + HEADER : i + HEADER + length]
        if length <= CHECKED_BYTES and struct.unpack_from("<I", data, end - 4)[0] != crc(payload):
            raise MetricFileError(f"{name or 'TensorBoard file'}: corrupt record at byte {base + i} (data checksum)")
        out.append((base + i, base + end, payload))
        i = end
    return out, base + i


def scalars(payload: bytes) -> tuple[dict[str, float | int], int | None, float | None]:
    """Pure: one serialized `Event` as (scalar values by tag, step, wall time)."""
    event_pb2, _, tensor_util = _tb()
    event = event_pb2.Event.FromString(payload)
    metrics: dict[str, float | int] = {}
    if event.WhichOneof("what") != "summary":
        return metrics, None, None
    for value in event.summary.value:
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            metrics[value.tag] = float(value.simple_value)
        elif kind == "tensor" and value.metadata.plugin_data.plugin_name in ("", "scalars"):
            try:
                array = tensor_util.make_ndarray(value.tensor)
            except (ValueError, TypeError):
                continue
            if array.ndim == 0 and array.dtype.kind in "fiu":
                metrics[value.tag] = array.item()
    return metrics, event.step, event.wall_time


def event_files(path: Path) -> list[Path]:
    """The event files of a run: the file itself, or every one under the directory (in name order)."""
    if is_dir(path):
        return sorted(p for p in path.rglob(f"*{PREFIX}*") if p.is_file())
    return [path] if reachable(path) else []


def sub_of(rel: str) -> str:
    """An event file's part of its producer: its path in the run directory, made safe and short."""
    safe = _UNSAFE.sub("_", rel)
    return safe if len(safe) <= 120 else safe[-120:].lstrip("/")


class EventFile:
    """Incremental reader of one event file; `offset` is the byte offset past the last record read."""

    def __init__(self, path: Path, *, rel: str, offset: int = 0) -> None:
        self.path = path
        self.sub = sub_of(rel)
        parent = str(Path(rel).parent)
        self.prefix = "" if parent == "." else parent + "/"
        self.offset = offset

    def poll(self, *, max_bytes: int = READ_CHUNK) -> list[Record]:
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_size <= self.offset:
                    return []
                while True:
                    f.seek(self.offset)
                    data = f.read(max_bytes)
                    found, resume = frames(data, self.offset, name=str(self.path))
                    if found or len(data) < max_bytes:
                        break
                    max_bytes *= 2  # one record longer than the chunk: read more rather than stall
        except FileNotFoundError:
            return []
        self.offset = resume
        out: list[Record] = []
        for start, end, payload in found:
            metrics, step, ts = scalars(payload)
            if metrics:
                named = {self.prefix + tag: v for tag, v in metrics.items()}
                out.append(Record("tb", self.sub, end, start, named, whole_step(step), ts))
        return out


class EventFiles:
    """A TensorBoard event file, or a run directory of them. For one file `offset` is its offset; a
    directory's files are read again from their start after an agent restart (their seqs are their
    offsets, so nothing is published twice)."""

    def __init__(self, path: Path, *, offset: int = 0, generation: int = 0, inode: int | None = None) -> None:
        self.path = Path(path)
        self.generation = generation
        self.inode = inode
        self._start = offset
        self.files: dict[Path, EventFile] = {}

    @property
    def exists(self) -> bool:
        return reachable(self.path)

    @property
    def offset(self) -> int:
        if is_dir(self.path) or not self.files:
            return 0 if is_dir(self.path) else self._start
        return next(iter(self.files.values())).offset

    @offset.setter
    def offset(self, value: int) -> None:
        self._start = value

    @property
    def progress(self) -> int:
        return sum(f.offset for f in self.files.values())

    def poll(self) -> list[Record]:
        out: list[Record] = []
        for path in event_files(self.path):
            reader = self.files.get(path)
            if reader is None:
                single = not is_dir(self.path)
                rel = path.name if single else str(path.relative_to(self.path))
                reader = self.files[path] = EventFile(path, rel=rel, offset=self._start if single else 0)
            out.extend(reader.poll())
        return out

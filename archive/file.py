"""Archive files on disk: written durably, read back checked.

Writing goes to a partial file in the run's archive directory (`.archive-<pid>.partial`), which
is closed, flushed and fsync'ed, then renamed to its final name and the directory fsync'ed: a
crash leaves either a partial file (garbage, removed by the next archive) or a whole file, never a
final name over half a file. The gzip header carries no time or name, so the same entries always
give the same bytes. Reading accepts the gzip file or its decompressed `.jsonl`.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from trainwarden.archive.errors import ArchiveFormatError
from trainwarden.archive.format import (
    ArchiveParser,
    Entry,
    Footer,
    Header,
    encode_footer,
    encode_header,
    encode_line,
)
from trainwarden.events.envelope import Event
from trainwarden.events.store import Malformed

PARTIAL_GLOB = ".archive-*.partial"
GZIP_MAGIC = b"\x1f\x8b"
COMPRESS_LEVEL = 6  # zlib's default: most of level 9's ratio at a third of its time


@dataclass(frozen=True, slots=True)
class ArchiveSummary:
    """What one archive file holds, as written or as read back."""

    path: Path
    run: str
    count: int
    first: str | None
    last: str | None
    malformed: int
    raw_bytes: int  # the JSON lines, uncompressed
    size: int  # the file on disk
    sha256: str  # of the file on disk


def fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    """Create `path` (and parents) durably: each new directory's entry is fsync'ed in its parent."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        fsync_dir(directory.parent)


class _Hashing:
    """A binary file wrapper that hashes and counts what passes through it."""

    def __init__(self, inner: BinaryIO) -> None:
        self.inner = inner
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.inner.write(data)

    def read(self, n: int = -1) -> bytes:
        data = self.inner.read(n)
        self.sha.update(data)
        self.size += len(data)
        return data

    def readline(self, size: int = -1) -> bytes:
        data = self.inner.readline(size)
        self.sha.update(data)
        self.size += len(data)
        return data

    def __iter__(self) -> Iterator[bytes]:
        while line := self.readline():
            yield line

    def flush(self) -> None:
        self.inner.flush()


class ArchiveWriter:
    """One archive being written: `write` entries in stream order, `close`, then `publish` under its name."""

    def __init__(self, directory: Path, run: str) -> None:
        ensure_dir(directory)
        self.directory = directory
        self.run = run
        self.partial = directory / f".archive-{os.getpid()}.partial"
        self._raw = open(self.partial, "wb")  # noqa: SIM115 (closed in close() or discard())
        self._hashing = _Hashing(self._raw)
        self._gz = gzip.GzipFile(fileobj=self._hashing, mode="wb", mtime=0, filename="",
                                 compresslevel=COMPRESS_LEVEL)  # fmt: skip
        self.count = 0
        self.malformed = 0
        self.raw_bytes = 0
        self.first: str | None = None
        self.last: str | None = None
        self._put(encode_header(Header(run=run)))

    def write(self, sid: str, item: Event | Malformed) -> None:
        self._put(encode_line(sid, item))
        self.count += 1
        self.malformed += isinstance(item, Malformed)
        self.first = self.first or sid
        self.last = sid

    def flush(self) -> None:
        """Push what is written so far to the partial file (a crash after it leaves a readable prefix)."""
        self._gz.flush()
        self._raw.flush()

    def close(self) -> ArchiveSummary:
        """Write the footer and make the partial file's bytes durable (fsync)."""
        self._put(encode_footer(Footer(count=self.count, first=self.first, last=self.last)))
        self._gz.close()
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()
        return ArchiveSummary(path=self.partial, run=self.run, count=self.count, first=self.first, last=self.last,
                              malformed=self.malformed, raw_bytes=self.raw_bytes, size=self._hashing.size,
                              sha256=self._hashing.sha.hexdigest())  # fmt: skip

    def publish(self, name: str) -> Path:
        """Rename the closed partial file to `name` (replacing a file of that name) and fsync the directory."""
        final = self.directory / name
        os.replace(self.partial, final)
        fsync_dir(self.directory)
        return final

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self._gz.close()
        with contextlib.suppress(OSError):
            self._raw.close()
        with contextlib.suppress(FileNotFoundError):
            self.partial.unlink()

    def _put(self, line: bytes) -> None:
        self._gz.write(line)
        self.raw_bytes += len(line)


@contextlib.contextmanager
def _lines(path: Path, hashing: bool = False) -> Iterator[tuple[Iterable[bytes], _Hashing | None]]:
    try:
        raw = open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise ArchiveFormatError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        wrapped = _Hashing(raw) if hashing else None
        gzipped = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        source: Any = wrapped if wrapped is not None else raw
        yield (gzip.GzipFile(fileobj=source, mode="rb") if gzipped else source), wrapped
    finally:
        raw.close()


def read_archive(path: Path) -> Iterator[Entry]:
    """Every entry of an archive file, in order; ArchiveFormatError (file:line) on anything wrong."""
    parser = ArchiveParser(str(path))
    with _lines(path) as (stream, _):
        for raw in _checked(stream, parser):
            entry = parser.feed(raw)
            if entry is not None:
                yield entry
    parser.finish()


def scan_archive(path: Path) -> ArchiveSummary:
    """Read a whole archive back and summarise it (count, ids, size, hash): the check before a trim."""
    parser = ArchiveParser(str(path))
    malformed = raw_bytes = 0
    with _lines(path, hashing=True) as (stream, hashing):
        for raw in _checked(stream, parser):
            raw_bytes += len(raw)
            entry = parser.feed(raw)
            if entry is not None and isinstance(entry[1], Malformed):
                malformed += 1
        while hashing is not None and hashing.read(1 << 16):
            pass  # hash any bytes gzip did not need
    footer = parser.finish()
    assert parser.header is not None and hashing is not None
    return ArchiveSummary(path=path, run=parser.header.run, count=footer.count, first=footer.first,
                          last=footer.last, malformed=malformed, raw_bytes=raw_bytes, size=hashing.size,
                          sha256=hashing.sha.hexdigest())  # fmt: skip


def peek_archive(path: Path) -> tuple[Header, str | None]:
    """The header and the first entry's stream id, without reading the rest."""
    parser = ArchiveParser(str(path))
    first: str | None = None
    with _lines(path) as (stream, _):
        for raw in _checked(stream, parser):
            entry = parser.feed(raw)
            if entry is not None:
                first = entry[0]
                break
            if parser.footer is not None:
                break
    if parser.header is None:
        parser.finish()  # raises: empty file
    assert parser.header is not None
    return parser.header, first


def _checked(stream: Iterable[bytes], parser: ArchiveParser) -> Iterator[bytes]:
    """Lines of a file, turning gzip and I/O failures into ArchiveFormatError after the last good line."""
    it = iter(stream)
    while True:
        try:
            raw = next(it)
        except StopIteration:
            return
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
            where = f"after line {parser.line}" if parser.line else "at the start"
            problem = f"damaged or cut short {where}: {exc}"
            raise ArchiveFormatError(f"{parser.source}:{parser.line + 1}: {problem}") from exc
        yield raw

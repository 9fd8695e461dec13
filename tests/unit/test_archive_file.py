"""Archive files on disk: durable writes, deterministic bytes, damage reported with the line."""

import gzip
import math

import pytest
from trainwarden.archive.errors import ArchiveFormatError
from trainwarden.archive.file import ArchiveWriter, peek_archive, read_archive, scan_archive
from trainwarden.events.store import Malformed

from tests.helpers import metric

ENTRIES = [
    *((f"1000-{i}", metric("exp01", i, step=i, loss=math.nan if i == 3 else 1.0 / i)) for i in range(1, 200)),
    ("1001-0", Malformed(sid="1001-0", reason="not valid JSON", fields={b"e": b"{"})),
]


def write(directory, entries=ENTRIES):
    writer = ArchiveWriter(directory, "exp01")
    for sid, item in entries:
        writer.write(sid, item)
    summary = writer.close()
    path = writer.publish("exp01.jsonl.gz")
    return summary, path


def test_written_then_read_back(tmp_path):
    summary, path = write(tmp_path / "a" / "exp01")
    assert not list(path.parent.glob(".archive-*.partial"))
    assert (summary.count, summary.first, summary.last, summary.malformed) == (200, "1000-1", "1001-0", 1)
    assert [(s, repr(e)) for s, e in read_archive(path)] == [(s, repr(e)) for s, e in ENTRIES]
    check = scan_archive(path)
    assert (check.count, check.first, check.last, check.size, check.sha256, check.malformed) == (
        summary.count, summary.first, summary.last, summary.size, summary.sha256, 1
    )  # fmt: skip
    assert check.raw_bytes == summary.raw_bytes and summary.raw_bytes > 3 * summary.size  # compressed
    header, first = peek_archive(path)
    assert (header.run, first) == ("exp01", "1000-1")


def test_the_same_entries_give_the_same_bytes(tmp_path):
    one, _ = write(tmp_path / "one")
    two, _ = write(tmp_path / "two")
    assert one.sha256 == two.sha256


def test_a_decompressed_copy_reads_the_same(tmp_path):
    _, path = write(tmp_path)
    plain = tmp_path / "exp01.jsonl"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    assert [s for s, _ in read_archive(plain)] == [s for s, _ in ENTRIES]


def test_a_file_cut_short_says_after_which_line(tmp_path):
    _, path = write(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArchiveFormatError, match=r"exp01\.jsonl\.gz:\d+: damaged or cut short after line \d+"):
        list(read_archive(path))


def test_damaged_bytes_are_reported(tmp_path):
    _, path = write(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ArchiveFormatError, match=r"exp01\.jsonl\.gz:\d+: "):
        scan_archive(path)


def test_not_an_archive(tmp_path):
    other = tmp_path / "notes.jsonl.gz"
    other.write_bytes(gzip.compress(b'{"hello": 1}\n'))
    with pytest.raises(ArchiveFormatError, match=r"notes\.jsonl\.gz:1: .*is this a trainwarden archive"):
        peek_archive(other)
    with pytest.raises(ArchiveFormatError, match="cannot read"):
        peek_archive(tmp_path / "missing.jsonl.gz")

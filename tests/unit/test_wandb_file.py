"""The W&B transaction-log reader, on files the real wandb library writes (offline, in tmp)."""

import math
import shutil
import struct
import zlib

import pytest
from trainwarden.agent.errors import WandbFileError
from trainwarden.agent.wandb_file import BLOCK, FIRST, FULL, HEADER, LAST, MIDDLE, RunFile, frames
from trainwarden.agent.wandb_source import run_file

from tests.wandb_runs import write_offline_run

ROWS = [{"train/loss": 2.0 - i / 100, "lr": 3e-4, **({"eval_loss": "nan"} if i == 30 else {})} for i in range(50)]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    return write_offline_run(tmp_path_factory.mktemp("wandb"), ROWS)


def test_history_rows_of_a_real_offline_run(real_run):
    reader = RunFile(run_file(real_run))
    decoded = reader.poll()
    assert [h.step for h in decoded.history] == list(range(50))
    assert [h.metrics["train/loss"] for h in decoded.history] == [row["train/loss"] for row in ROWS]
    assert math.isnan(decoded.history[30].metrics["eval_loss"])
    assert all(h.ts is not None and h.ts > 1e9 for h in decoded.history)
    assert decoded.info is not None and decoded.info.project == "tw-test" and decoded.info.name == "exp01"
    assert decoded.exit is not None and decoded.exit.exit_code == 0
    assert reader.poll().history == []  # nothing new


def test_a_file_still_being_written_is_read_as_far_as_it_is_complete(real_run, tmp_path):
    """Cut the real file at many points: every read gives a prefix of the rows, and once the rest
    arrives the reader resumes where it stopped, with every row exactly once."""
    data = run_file(real_run).read_bytes()
    growing = tmp_path / "run-x.wandb"
    for cut in range(0, len(data), 211):
        growing.write_bytes(data[:cut])
        reader = RunFile(growing)
        first = reader.poll().history
        growing.write_bytes(data)
        rest = reader.poll().history
        assert [h.step for h in first + rest] == list(range(50)), cut


def frame(kind: int, payload: bytes) -> bytes:
    crc = zlib.crc32(payload, zlib.crc32(bytes([kind])))
    return struct.pack("<IHB", crc, len(payload), kind) + payload


def test_a_record_split_across_blocks_is_joined():
    big = b"x" * (BLOCK + 100)
    first_len = BLOCK - len(HEADER) - 7
    body = frame(FIRST, big[:first_len]) + frame(MIDDLE, big[first_len : first_len + BLOCK - 7])
    body += frame(LAST, big[first_len + BLOCK - 7 :]) + frame(FULL, b"small")
    records, resume = frames(body, len(HEADER))
    assert [payload for _, payload in records] == [big, b"small"]
    assert resume == len(HEADER) + len(body)


def test_block_tail_padding_is_skipped():
    filler = BLOCK - len(HEADER) - 7 - 3  # leaves 3 bytes in the block: too few for a header
    body = frame(FULL, b"a" * filler) + b"\0\0\0" + frame(FULL, b"next")
    records, _ = frames(body, len(HEADER))
    assert [p for _, p in records][-1] == b"next"


def test_a_checksum_mismatch_names_the_offset():
    body = bytearray(frame(FULL, b"payload"))
    body[-1] ^= 0xFF
    with pytest.raises(WandbFileError, match="corrupt W&B record at byte 7"):
        frames(bytes(body), len(HEADER))


def test_not_a_wandb_file(tmp_path):
    path = tmp_path / "run-x.wandb"
    path.write_bytes(b"hello world, not W&B")
    with pytest.raises(WandbFileError, match="not a W&B transaction log"):
        RunFile(path).poll()


def test_copy_of_a_run_dir_is_found_by_its_name(real_run, tmp_path):
    copy = tmp_path / "wandb" / real_run.name
    shutil.copytree(real_run, copy)
    assert run_file(copy) is not None and run_file(tmp_path) is None

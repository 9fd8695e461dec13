"""A full disk under the agent's spool and offsets file: the agent stays up, says so, and loses no line.

The agent's state file and spool live on a real 256 KB tmpfs, filled for real. First Redis takes every
event but the offsets cannot be saved; then Redis refuses writes (out of memory) while the spool has
room for a few events only, the agent is killed (kill -9) holding lines it could neither publish nor
spool, and started again on the full disk. Once Redis takes writes, every line must be in the run's log
exactly once; once the disk has room, the offsets are saved again.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore

from tests.conftest import cli_argv, spawn, stop_process
from tests.faults.test_redis_oom import fill_until_refused
from tests.helpers import events_of, wait_for
from trainwarden.tools.redis_server import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.slow]

LINES = 3_000
ROOM = 48 * 1024  # what the spool gets while Redis refuses writes: a few hundred events, not all


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 256 KB filesystem (tmpfs), mounted for the test."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill for real (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def fill(disk: Path, *, leave: int = 0) -> Path:
    """Fill `disk` until it has `leave` bytes left (0: until the write fails with ENOSPC)."""
    filler = disk / "filler"
    with open(filler, "ab") as f:
        while True:
            room = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize - leave
            if room <= 0:
                break
            try:
                f.write(b"\0" * min(room, 4096))
                f.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
    return filler


def steps(store: EventStore, run: str) -> Counter[int]:
    return Counter(int(e.data["step"]) for e in events_of(store, run, t.METRIC) if "step" in e.data)


def write_lines(log: Path, first: int, last: int) -> None:
    with open(log, "a") as f:
        f.writelines(f"step={s} loss={2.0 - s / LINES:.6f}\n" for s in range(first, last + 1))


def test_a_full_disk_under_the_spool_and_offsets_loses_no_line(own_redis: RedisServer, small_disk: Path,
                                                               tmp_path: Path) -> None:  # fmt: skip
    settings = tmp_path / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": own_redis.url, "host": "testhost", "heartbeat_interval_s": 1,
        "agent": {"state_file": str(small_disk / "offsets.json"), "poll_interval_s": 0.02, "nvml": False,
                  "heartbeat_interval_s": 1},
    }))  # fmt: skip
    train_log = tmp_path / "train.log"
    write_lines(train_log, 1, 100)
    client = own_redis.client(socket_timeout=5)
    store = EventStore(client, keys=Keys())
    agent_log = tmp_path / "agent.log"

    def start_agent() -> subprocess.Popen[bytes]:
        return spawn(settings, agent_log, "agent", "--watch", f"exp01={train_log}")

    def health() -> str:
        return subprocess.run(
            cli_argv(settings, "health"), capture_output=True, text=True, timeout=60, check=False
        ).stdout

    agent = start_agent()
    try:
        wait_for(lambda: len(steps(store, "exp01")) == 100, timeout=60, what="the first lines published")

        # 1. The disk fills up while Redis takes every event: the offsets cannot be saved; nothing else changes.
        filler = fill(small_disk)
        write_lines(train_log, 101, 200)
        wait_for(lambda: len(steps(store, "exp01")) == 200, timeout=60, what="the lines after the disk filled")
        time.sleep(2)  # a few tries to save the offsets
        assert agent.poll() is None, agent_log.read_text()
        wait_for(lambda: "No space left on device" in health(), timeout=30, what="health naming the full disk")

        # 2. Redis refuses writes too, with room on the disk for part of what comes: the rest waits in the log.
        os.truncate(filler, 0)
        fill(small_disk, leave=ROOM)
        fill_until_refused(client)
        write_lines(train_log, 201, LINES)
        wait_for(lambda: "cannot write the spool" in agent_log.read_text(errors="replace"), timeout=60,
                 what="the spool out of room")  # fmt: skip
        assert agent.poll() is None, agent_log.read_text()
        assert (small_disk / "spool" / "spool.jsonl").stat().st_size > 0  # what fitted was kept

        # 3. Killed now, it holds lines it could neither publish nor spool; started again on the full disk.
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait()
        agent = start_agent()
        wait_for(lambda: agent_log.read_text(errors="replace").count("cannot write the spool") == 2, timeout=60,
                 what="the agent started again meeting the full disk")  # fmt: skip
        time.sleep(2)  # and living with it
        assert agent.poll() is None, agent_log.read_text()

        # 4. Redis takes writes again: every line lands once, and the agent's heartbeat counted what it could not keep.
        client.config_set("maxmemory", 0)
        wait_for(lambda: len(steps(store, "exp01")) == LINES, timeout=120, what="every line published")
        published = steps(store, "exp01")
        assert set(published) == set(range(1, LINES + 1))
        assert max(published.values()) == 1, "a line published twice"
        spool_reports = [e.data["spool"] for e in events_of(store, "exp01", t.AGENT_HEARTBEAT)]
        assert any(s.get("write_failures", 0) > 0 for s in spool_reports), spool_reports
        assert any("No space left on device" in (s.get("error") or "") for s in spool_reports), spool_reports

        # 5. The disk has room again: the offsets are saved up to the log's end.
        filler.unlink()
        state = small_disk / "offsets.json"
        wait_for(lambda: state.exists() and yaml.safe_load(state.read_text())["logs"]["exp01"]["offset"]
                 == train_log.stat().st_size, timeout=30, what="the offsets saved once the disk has room")  # fmt: skip
        assert agent.poll() is None
    finally:
        stop_process(agent)
        print("--- agent.log (tail)\n" + agent_log.read_text(errors="replace")[-4000:])
    assert agent.returncode == 0

"""Redis out of memory: every daemon waits it out, and once memory is freed everything catches up.

A real redis-server gets a small `maxmemory` (policy `noeviction`) and is filled until it refuses
writes (`OOM command not allowed ...`), while the real agent, dispatcher, worker and bot run as
processes. The training log grows by thousands of lines and a NaN during the refusal; then memory is
freed (`CONFIG SET maxmemory 0`) and every line must be in the run's log, the NaN stopped, and every
daemon still up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis
import yaml
from trainwarden.events import types as t
from trainwarden.events.errors import StoreError
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore

from tests.conftest import cli_argv, spawn, stop_process
from tests.helpers import evaluated_to_end, events_of, wait_for
from trainwarden.tools.redis_server import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.slow]

DAEMONS = ("dispatcher", "worker", "bot", "agent")
LINES = 15_000  # the last one is the NaN
BEFORE = 2_000  # published before Redis refuses writes; the others are written while it does


def loss(step: int) -> str:
    return f"{2.0 - step / LINES:.6f}"  # falling: no rule but the NaN's fires


@pytest.fixture
def own_redis(tmp_path: Path):
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def fill_until_refused(client: redis.Redis, headroom: int = 2 * 2**20) -> int:
    """Give Redis `headroom` bytes more than it uses, then fill them until it refuses a write; returns maxmemory."""
    client.config_set("maxmemory-policy", "noeviction")
    limit = (int(client.info("memory")["used_memory"]) + headroom) // 2**20 * 2**20 + 2**20  # whole MB
    client.config_set("maxmemory", limit)
    n = 0
    for size in (65536, 1024, 16):  # down to the smallest write, so that no heartbeat fits either
        for _ in range(10_000):
            n += 1
            try:
                client.set(f"filler:{n}", b"x" * size)
            except redis.exceptions.OutOfMemoryError:
                break
        else:
            raise AssertionError("Redis never refused a write")
    # Redis frees a little now and then (AOF buffers, feed entries the daemons acknowledge and trim) and would
    # take a write or two: a limit a megabyte under what it uses keeps it refusing until the test frees it
    limit = (int(client.info("memory")["used_memory"]) - 2**20) // 2**20 * 2**20
    client.config_set("maxmemory", limit)
    return limit


def steps(store: EventStore, run: str) -> set[int]:
    try:
        return {int(e.data["step"]) for e in events_of(store, run, t.METRIC) if "step" in e.data}
    except StoreError:
        return set()


def worker_busy(client: redis.Redis) -> bool:
    return any(client.hget(name, "state") == b"busy" for name in client.smembers("rq:workers"))


def decisions(store: EventStore, run: str) -> list[str]:
    try:
        return [e.data["decision"] for e in events_of(store, run, t.DECISION)]
    except StoreError:
        return []


def test_daemons_wait_out_redis_oom_and_every_line_is_published_after_it(own_redis: RedisServer,
                                                                          tmp_path: Path) -> None:  # fmt: skip
    settings = tmp_path / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": own_redis.url, "host": "testhost", "heartbeat_interval_s": 1,
        "evidence_dir": str(tmp_path / "evidence"), "findings_file": str(tmp_path / "findings.md"),
        "agent": {"state_file": str(tmp_path / "offsets.json"), "poll_interval_s": 0.02, "nvml": False},
        "workers": {"reclaim_idle_s": 1, "lock_timeout_s": 2},
    }))  # fmt: skip
    train_log = tmp_path / "train.log"
    train_log.write_text("step=1 loss=2.0\n")
    client = own_redis.client(socket_timeout=5)
    store = EventStore(client, keys=Keys())
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        procs["dispatcher"] = spawn(settings, tmp_path / "dispatcher.log", "dispatcher")
        procs["worker"] = spawn(settings, tmp_path / "worker.log", "worker")
        procs["bot"] = spawn(settings, tmp_path / "bot.log", "bot", env={"SLACK_BOT_TOKEN": ""})
        procs["agent"] = spawn(settings, tmp_path / "agent.log", "agent", "--watch", f"exp01={train_log}")
        wait_for(lambda: decisions(store, "exp01"), timeout=60, what="the worker's first decision on exp01")

        # The dispatcher, the worker and the bot are paused while the first lines reach Redis, so that they
        # meet the refusal with work to do: enqueue jobs, commit checkpoints, record notifications.
        for name in ("dispatcher", "worker", "bot"):
            os.killpg(procs[name].pid, signal.SIGSTOP)
        with open(train_log, "a") as f:
            f.writelines(f"step={step} loss={loss(step)}\n" for step in range(2, BEFORE + 1))
        wait_for(lambda: len(steps(store, "exp01")) == BEFORE, timeout=60, what="the first lines published")
        limit = fill_until_refused(client)
        for name in ("dispatcher", "worker", "bot"):
            os.killpg(procs[name].pid, signal.SIGCONT)
        with open(train_log, "a") as f:
            f.writelines(f"step={step} loss={loss(step)}\n" for step in range(BEFORE + 1, LINES))
            f.write(f"step={LINES} loss=nan\n")
        for name in ("agent", "dispatcher"):
            wait_for(lambda: "refuses writes" in (tmp_path / f"{name}.log").read_text(errors="replace"),  # noqa: B023
                     timeout=30, what=f"the {name} meeting the refusal")  # fmt: skip
        time.sleep(3)  # every daemon meets the refusal for a while
        health = subprocess.run(cli_argv(settings, "health"), capture_output=True, text=True, timeout=60, check=False)
        assert f"Redis refuses writes: out of memory (maxmemory {limit // 2**20} MB)" in health.stdout, health
        assert health.returncode == 1
        alive = {name: procs[name].poll() is None for name in DAEMONS}
        assert alive == dict.fromkeys(DAEMONS, True)

        client.config_set("maxmemory", 0)  # memory freed: Redis takes writes again
        freed = time.monotonic()
        wait_for(lambda: "STOP" in decisions(store, "exp01"), timeout=90, what="the NaN stopped after the refusal")
        stopped_s = time.monotonic() - freed
        wait_for(lambda: len(steps(store, "exp01")) == LINES, timeout=60, what="every line published")
        print(f"MEASURED lines lost {LINES - len(steps(store, 'exp01'))} of {LINES}; memory freed -> STOP "
              f"{stopped_s:.2f}s")  # fmt: skip
        assert steps(store, "exp01") == set(range(1, LINES + 1))
        alive = {name: procs[name].poll() is None for name in DAEMONS}
        assert alive == dict.fromkeys(DAEMONS, True)
        wait_for(lambda: "STOP exp01" in (tmp_path / "bot.log").read_text(errors="replace"), timeout=30,
                 what="the STOP posted")  # fmt: skip
        wait_for(lambda: evaluated_to_end(store, "exp01"), timeout=60, what="the whole log evaluated")
        wait_for(lambda: not worker_busy(client), timeout=60, what="the worker idle again")
    finally:
        for proc in procs.values():
            stop_process(proc)
        for name in DAEMONS:  # shown by pytest only when the test fails
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])
    for name in DAEMONS:
        assert procs[name].returncode == 0, name

"""`up --redis` keeps the redis-server it started: kill -9 of it (as the OOM killer does) and `up` starts it
again on the same data, the daemons reconnect, and a NaN after the kill is still stopped; a redis-server that
cannot be started again makes `up` exit 1, so the supervisor above it (Restart=on-failure) takes over.

Issue #38 item 2: before, `up` neither restarted it nor exited, and every daemon retried forever.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
import yaml
from trainwarden.events import types as t
from trainwarden.events.errors import StoreError
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore

from tests.helpers import events_of, metric, nan_metric, wait_for
from trainwarden.tools.redis_server import free_port

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def start_up(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, int]:
    """`trainwarden up --redis` on a free port, its data in tmp_path/data; once all four daemons run."""
    port = free_port()
    settings = tmp_path / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": f"redis://127.0.0.1:{port}/0", "host": "testhost", "data_dir": str(tmp_path / "data"),
        "agent": {"nvml": False}, "workers": {"reclaim_idle_s": 1, "lock_timeout_s": 2},
    }))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}  # the console bot
    console = tmp_path / "up.log"
    with open(console, "wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "trainwarden", "--config", str(settings), "up", "--redis"],
                                stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)  # fmt: skip
    wait_for(lambda: "all four daemons are running" in console.read_text() or proc.poll() is not None, timeout=90,
             what="up: all four daemons running")  # fmt: skip
    assert proc.poll() is None, console.read_text()
    return proc, console, port


def redis_pid(client: redis.Redis) -> int:
    return int(client.info("server")["process_id"])


def decisions(store: EventStore, run: str) -> list[str]:
    try:
        return [e.data["decision"] for e in events_of(store, run, t.DECISION)]
    except (StoreError, redis.RedisError):
        return []


def finish(proc: subprocess.Popen[bytes], console: Path) -> int:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print("--- up's console (tail)\n" + console.read_text(errors="replace")[-4000:])
    return proc.returncode


def test_up_restarts_its_killed_redis_on_the_same_data_and_the_nan_after_it_is_stopped(tmp_path: Path) -> None:
    proc, console, port = start_up(tmp_path)
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
    store = EventStore(client, keys=Keys())
    try:
        store.append([metric("before", 1, loss=2.0), nan_metric("before", 2)])
        wait_for(lambda: "STOP" in decisions(store, "before"), timeout=60, what="the NaN before the kill stopped")
        time.sleep(1.5)  # appendfsync everysec: what is older than a second is on disk
        killed = redis_pid(client)
        os.kill(killed, signal.SIGKILL)
        wait_for(lambda: "redis-server exited (killed by signal 9 (SIGKILL)); restarting it" in console.read_text()
                 or proc.poll() is not None, timeout=30, what="up saying it restarts redis-server")  # fmt: skip
        wait_for(lambda: "redis-server restarted on port" in console.read_text() or proc.poll() is not None,
                 timeout=30, what="up restarting redis-server")  # fmt: skip
        assert proc.poll() is None, "up exited instead of restarting its redis-server"
        assert redis_pid(client) != killed
        # the AOF brought back what was written before the kill
        assert "STOP" in decisions(store, "before")
        store.append([metric("after", 1, loss=2.0), nan_metric("after", 2)])
        began = time.monotonic()
        wait_for(lambda: "STOP" in decisions(store, "after"), timeout=60, what="the NaN after the kill stopped")
        print(f"MEASURED: NaN -> STOP after up restarted its killed redis-server: {time.monotonic() - began:.2f}s")
        assert "exited with status" not in console.read_text(), "a daemon exited"
    finally:
        client.close()
        code = finish(proc, console)
    assert code == 0
    assert "redis-server stopped" in console.read_text()


def test_up_exits_1_naming_why_when_its_redis_cannot_be_started_again(tmp_path: Path) -> None:
    proc, console, port = start_up(tmp_path)
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        # kill -9 the redis-server, and take its port before `up` starts it again there; should `up` be quicker,
        # kill the new one too: either way it cannot keep one running
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                squatter.bind(("127.0.0.1", port))
                break
            except OSError:
                try:
                    os.kill(redis_pid(client), signal.SIGKILL)
                except redis.RedisError:
                    time.sleep(0.001)
        squatter.listen(1)
        wait_for(lambda: proc.poll() is not None, timeout=120, what="up exiting")
    finally:
        client.close()
        squatter.close()
        code = finish(proc, console)
    text = console.read_text()
    assert code == 1
    assert "redis-server could not be kept running after 5 attempts" in text
    assert "stopping the daemons" in text and "all stopped" in text

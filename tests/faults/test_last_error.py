"""The error that ends a daemon is the last error its heartbeat shows, not an older warning.

The agent starts with GPU sampling off (a warning, which becomes its heartbeat's last error), then
Redis stops letting it run the append script (an ACL change: NOPERM), which ends it with status 1.
`trainwarden health` must then name NOPERM, not the GPU warning.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from trainwarden.events.heartbeat import read_beats
from trainwarden.events.keys import Keys

from tests.conftest import cli_argv, spawn, stop_process
from tests.helpers import wait_for
from trainwarden.tools.redis_server import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def test_the_error_that_ends_a_daemon_is_its_last_error(own_redis: RedisServer, tmp_path: Path) -> None:
    settings = tmp_path / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": own_redis.url, "host": "testhost", "heartbeat_interval_s": 60,
        "agent": {"state_file": str(tmp_path / "offsets.json"), "poll_interval_s": 0.02, "nvml": False},
    }))  # fmt: skip
    train_log = tmp_path / "train.log"
    train_log.write_text("step=1 loss=2.0\n")
    client = own_redis.client(socket_timeout=5)
    agent = spawn(settings, tmp_path / "agent.log", "agent", "--watch", f"exp01={train_log}")
    try:
        wait_for(lambda: [b for b in read_beats(client, Keys()) if b.role == "agent" and b.last_error], timeout=60,
                 what="the agent's first heartbeat, with the GPU warning")  # fmt: skip
        client.execute_command("ACL", "SETUSER", "default", "-@scripting")  # appends run a script: NOPERM
        with open(train_log, "a") as f:
            f.write("step=2 loss=1.9\n")
        assert agent.wait(timeout=60) == 1
    finally:
        stop_process(agent)
        client.execute_command("ACL", "SETUSER", "default", "+@all")
    beat = next(b for b in read_beats(client, Keys()) if b.role == "agent")
    assert "no permissions" in (beat.last_error or ""), beat
    assert "GPU" not in (beat.last_error or "")
    health = subprocess.run(
        cli_argv(settings, "health", "--json"), capture_output=True, text=True, timeout=60, check=False
    )
    assert "no permissions" in health.stdout, health

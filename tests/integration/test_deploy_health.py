"""`trainwarden health --here`, the compose file's and the image's health check: a container is healthy
while its own daemon beats, whatever another host's daemons do.

Real redis-server and the real CLI as a process; the heartbeats are written by the daemons' own class."""

from __future__ import annotations

import subprocess
from pathlib import Path

import redis
from trainwarden.events.heartbeat import Heartbeat
from trainwarden.events.keys import Keys

from tests.conftest import cli_argv

HERE = "testhost"  # the settings_file fixture's host


def health(settings: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_argv(settings, "health", *args), capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip


def beat(r: redis.Redis, role: str, host: str) -> Heartbeat:
    heartbeat = Heartbeat(client=r, keys=Keys(), role=role, host=host, version="test", interval_s=60)
    assert heartbeat.beat(force=True)
    return heartbeat


def test_here_judges_only_this_hosts_daemons(settings_file: Path, r: redis.Redis) -> None:
    beat(r, "dispatcher", HERE)
    beat(r, "worker", "worker-2").stopped()  # another container's daemon, stopped: `health` exits 1 for it

    everyone = health(settings_file)
    assert everyone.returncode == 1, everyone.stdout
    assert "worker@worker-2" in everyone.stdout

    here = health(settings_file, "--here")
    assert here.returncode == 0, here.stdout + here.stderr
    assert f"dispatcher@{HERE}" in here.stdout
    assert "worker-2" not in here.stdout


def test_here_is_unhealthy_when_this_hosts_daemon_stopped_or_never_beat(settings_file: Path, r: redis.Redis) -> None:
    beat(r, "worker", "worker-2")  # another host's healthy daemon does not make this one healthy

    never = health(settings_file, "--here")
    assert never.returncode == 1
    assert f"no daemon on {HERE} has sent a heartbeat" in never.stdout

    beat(r, "notifier", HERE).stopped()
    stopped = health(settings_file, "--here")
    assert stopped.returncode == 1
    assert f"notifier@{HERE}" in stopped.stdout and "STOPPED" in stopped.stdout

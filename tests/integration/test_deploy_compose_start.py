"""The compose file's daemons start as shipped and turn healthy (no docker on the CI machine: each service's
command runs as a process with the environment compose would give its container).

Each gets its `environment:` (with the test's redis-server for `redis:6379`), the example settings
(deploy/config, copied where the container would mount it), the image's data directory and the
service's `hostname:` (TRAINWARDEN_HOST stands for the container's host name); then its health check,
run as docker would, must pass. Before the example config existed, each exited at once: "cannot read
settings file /config/trainwarden.yaml"."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from subprocess import Popen

import pytest

from tests.conftest import REPO, stop_process
from tests.deploy_files import DEPLOY, compose, interpolate
from tests.helpers import wait_for
from trainwarden.tools.redis_server import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def container_env(service: dict, *, redis_url: str, config: Path, data: Path) -> dict[str, str]:
    env = {k: interpolate(str(v), {}) for k, v in service["environment"].items()}
    assert env["REDIS_URL"] == "redis://redis:6379/0" and env["TRAINWARDEN_CONFIG"].startswith("/config/")
    env["REDIS_URL"] = redis_url
    env["TRAINWARDEN_CONFIG"] = str(config / Path(env["TRAINWARDEN_CONFIG"]).relative_to("/config"))
    return {**os.environ, **env, "TRAINWARDEN_DATA_DIR": str(data), "TRAINWARDEN_HOST": service["hostname"]}


@pytest.fixture
def started(redis_server: RedisServer, tmp_path: Path) -> Iterator[dict[str, tuple[dict, dict[str, str], Popen]]]:
    config = tmp_path / "config"
    shutil.copytree(DEPLOY / "config", config)
    services = {name: s for name, s in compose()["services"].items() if "build" in s}
    procs, out = [], {}
    for name, service in services.items():
        env = container_env(service, redis_url=redis_server.url, config=config, data=tmp_path / "data")
        log = open(tmp_path / f"{name}.log", "ab")  # noqa: SIM115 (closed at teardown)
        proc = Popen([sys.executable, "-m", "trainwarden", *service["command"]], env=env, stdout=log,
                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=REPO)  # fmt: skip
        procs.append((log, proc))
        out[name] = (service, env, proc)
    yield out
    for log, proc in procs:
        stop_process(proc)
        log.close()
    for name in services:
        print(f"--- {name}\n{(tmp_path / f'{name}.log').read_text()[-2000:]}")


def healthy(service: dict, env: dict[str, str], proc: Popen) -> bool:
    assert proc.poll() is None, f"exited with {proc.returncode} (its log is printed below)"
    test = service["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1] == "trainwarden"
    argv = [sys.executable, "-m", "trainwarden", *test[2:]]
    return subprocess.run(argv, env=env, capture_output=True, timeout=60, check=False).returncode == 0


def test_every_daemon_starts_with_the_shipped_config_and_passes_its_health_check(started: dict) -> None:
    for name, (service, env, proc) in started.items():
        wait_for(lambda s=service, e=env, p=proc: healthy(s, e, p), timeout=60, interval=0.5, what=f"{name} healthy")

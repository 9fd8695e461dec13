"""Fixtures: a real redis-server on a free port, real tmux on a private socket, worker context."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml
from redis.cluster import RedisCluster
from rq import Queue
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore
from trainwarden.remote.stop import LocalTmuxController, tmux_argv
from trainwarden.workers import context
from trainwarden.workers.chart import preload
from trainwarden.workers.context import WorkerContext
from trainwarden.workers.policy_source import PolicySource

from tests.helpers import wait_for
from tests.slack_api import SlackAPI
from trainwarden import wiring
from trainwarden.settings import Settings
from trainwarden.tools.redis_server import RedisClusterServers, RedisServer

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def data_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """No test writes into the user's data directory: every Settings default and every process a test
    starts resolves it under this temporary XDG_DATA_HOME (settings.default_data_dir). And no test inherits
    this machine's PYTHONUNBUFFERED."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("xdg-data")
        mp.setenv("XDG_DATA_HOME", str(path))
        mp.delenv("TRAINWARDEN_DATA_DIR", raising=False)
        # Every process a test starts runs as on a lab's machine, where Python block-buffers print into a pipe
        # or a file: this machine's PYTHONUNBUFFERED=1 would hide it (a run is unbuffered only where trainwarden
        # itself makes it so: remote/wrapper.py LAUNCH_ENV, tests/integration/test_buffered_output.py).
        mp.delenv("PYTHONUNBUFFERED", raising=False)
        yield path


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def r(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis_server.client()
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def store(r: redis.Redis) -> EventStore:
    return EventStore(r, keys=Keys())


@pytest.fixture
def tmux_socket() -> Iterator[str]:
    name = f"tw-test-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(tmux_argv(name, "kill-server"), capture_output=True, check=False)


@pytest.fixture
def worker_ctx(store: EventStore, tmp_path: Path) -> Iterator[WorkerContext]:
    preload()  # as `trainwarden worker` does: the first matplotlib import must not eat the 2 s run lock
    ctx = WorkerContext(
        store=store,
        host="worker-test",
        policies=PolicySource(host="worker-test"),
        controller=LocalTmuxController(),
        evidence_dir=tmp_path / "evidence",
        findings_file=tmp_path / "findings.md",
        lock_timeout_s=2.0,
    )
    context.install(ctx)
    yield ctx
    context.install(None)


@pytest.fixture
def settings_file(redis_server: RedisServer, tmp_path: Path) -> Path:
    """A settings file for the CLI processes a test starts."""
    path = tmp_path / "trainwarden.yaml"
    body = {
        "redis_url": redis_server.url,
        "host": "testhost",
        "evidence_dir": str(tmp_path / "evidence"),
        "findings_file": str(tmp_path / "findings.md"),
        "agent": {"state_file": str(tmp_path / "offsets.json"), "poll_interval_s": 0.02},
        "workers": {"reclaim_idle_s": 1, "lock_timeout_s": 2},
    }
    path.write_text(yaml.safe_dump(body))
    return path


def cli_argv(settings: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "trainwarden", "--config", str(settings), "--log-level", "WARNING", *args]


def spawn(settings: Path, log: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a trainwarden process in its own process group (so kill -9 reaches its children)."""
    with open(log, "ab") as sink:
        return subprocess.Popen(
            cli_argv(settings, *args),
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **(env or {})},
            cwd=REPO,
        )


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL to its group if it has not exited in 30 s (a forking worker first finishes its
    job: a chart's first matplotlib import on a loaded 2-core machine took over 10 s)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


def watch_until_stopped(settings: Path, store: EventStore, tmp_path: Path, run: str, log: Path) -> None:
    """The real agent (tailing `log`), dispatcher and worker, until `run`'s STOP is carried out; each
    one's log tail is printed (pytest shows it when the test fails)."""
    from trainwarden.events import types as t

    from tests.helpers import events_of

    procs = [
        spawn(settings, tmp_path / "agent.log", "agent", "--watch", f"{run}={log}"),
        spawn(settings, tmp_path / "dispatcher.log", "dispatcher"),
        spawn(settings, tmp_path / "worker.log", "worker"),
    ]
    try:
        wait_for(lambda: events_of(store, run, t.STOP_DONE), timeout=30, what="stop.done")
    finally:
        for p in procs:
            stop_process(p)
        for name in ("agent", "dispatcher", "worker"):
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])
        print("--- events:", [(e.type, e.data.get("decision")) for e in events_of(store, run)])


def kill_at_failpoint(
    settings: Path, log: Path, client: redis.Redis, failpoint: str, *args: str, env: dict[str, str] | None = None
) -> None:
    """Start a trainwarden process with `failpoint` armed, wait until it is frozen there, kill -9 it."""
    doomed = spawn(settings, log, *args, env={**(env or {}), "TRAINWARDEN_FAILPOINTS": failpoint})
    try:
        frozen = int(wait_for(lambda: client.get(Keys().fault(failpoint)), timeout=30, what=f"failpoint {failpoint}"))
        # The process frozen there may be an RQ work horse, which runs in a session of its own (setsid):
        # kill it by pid as well as the process group we started.
        os.kill(frozen, 9)
        os.killpg(doomed.pid, 9)
        doomed.wait()
    finally:
        stop_process(doomed)


__all__ = ["cli_argv", "kill_at_failpoint", "spawn", "stop_process", "wait_for"]


@pytest.fixture
def slack_api() -> Iterator[SlackAPI]:
    """A local server speaking the Slack Web API shapes the bot uses (tests/slack_api.py)."""
    api = SlackAPI()
    yield api
    api.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    """A real 3-master Redis Cluster on loopback, one per test module (started in a few seconds)."""
    with RedisClusterServers(tmp_path_factory.mktemp("cluster")) as servers:
        yield servers


@pytest.fixture
def cstore(cluster: RedisClusterServers) -> Iterator[EventStore]:
    """An event store on `cluster`, through the daemons' own client wiring, every master emptied first."""
    client = wiring.events_redis(Settings(redis_url=cluster.url))
    assert isinstance(client, RedisCluster)
    client.flushall(target_nodes=RedisCluster.PRIMARIES)
    yield EventStore(client, keys=Keys())
    client.close()


@pytest.fixture
def queue(r: redis.Redis) -> Queue:
    """The RQ queue of the in-process dispatcher and worker tests, on the test's Redis."""
    return Queue("tw-test", connection=r)

"""Redis restarts under load: every daemon rides it out and a NaN after it is stopped, no daemon restarted.

The real daemons run as processes against a redis-server of the test's own, which is shut down
(`SHUTDOWN`, as an operator or a package upgrade does) while the worker is busy and started again
on the same port and data (AOF), as in production.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
import yaml
from trainwarden.events import types as t
from trainwarden.events.errors import StoreError
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore

from tests.conftest import spawn, stop_process
from tests.helpers import evaluated_to_end, events_of, metric, wait_for
from tests.slack_api import SlackAPI
from trainwarden.tools.redis_server import RedisServer, free_port

pytestmark = [pytest.mark.redis, pytest.mark.slow]

DAEMONS = ("dispatcher", "worker", "bot", "agent")
SIM_RUNS = 10


@pytest.fixture
def own_redis(tmp_path: Path):
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def shutdown(server: RedisServer) -> None:
    """`redis-cli SHUTDOWN`: Redis writes its AOF and exits."""
    subprocess.run(["redis-cli", "-p", str(server.port), "SHUTDOWN"], capture_output=True, timeout=10, check=False)
    assert server.process is not None
    server.process.wait(timeout=10)


def decisions(store: EventStore, run: str) -> list[str]:
    try:
        return [e.data["decision"] for e in events_of(store, run, t.DECISION)]
    except StoreError:
        return []


def worker_busy(client: redis.Redis) -> bool:
    return any(client.hget(name, "state") == b"busy" for name in client.smembers("rq:workers"))


@pytest.mark.parametrize(("fork", "slack"), [(False, True), (True, False)],
                         ids=["worker+slack-bot", "forking-worker+console-bot"])  # fmt: skip
def test_daemons_ride_out_a_redis_restart_and_stop_the_nan_after_it(
    fork: bool, slack: bool, own_redis: RedisServer, slack_api: SlackAPI, tmp_path: Path
) -> None:
    settings = tmp_path / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": own_redis.url, "host": "testhost",
        "evidence_dir": str(tmp_path / "evidence"), "findings_file": str(tmp_path / "findings.md"),
        "agent": {"state_file": str(tmp_path / "offsets.json"), "poll_interval_s": 0.02, "nvml": False},
        "workers": {"reclaim_idle_s": 1, "lock_timeout_s": 2},
        "slack": {"channel": "C1", "rate_per_s": 1000, "burst": 1000, "http_host": "127.0.0.1",
                  "http_port": free_port()},
    }))  # fmt: skip
    bot_env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_API_URL": slack_api.url, "SLACK_SIGNING_SECRET": "s3cret"}
    if not slack:
        bot_env = {"SLACK_BOT_TOKEN": ""}  # console mode: posts go to its output

    def posted() -> list[str]:
        if slack:
            return slack_api.texts()
        return (tmp_path / "bot.log").read_text(errors="replace").splitlines()

    train_log = tmp_path / "train.log"
    train_log.write_text("step=1 loss=2.0\n")
    store = EventStore(own_redis.client(socket_timeout=2), keys=Keys())
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        procs["dispatcher"] = spawn(settings, tmp_path / "dispatcher.log", "dispatcher")
        procs["worker"] = spawn(settings, tmp_path / "worker.log", "worker", *(["--fork"] if fork else []))
        procs["bot"] = spawn(settings, tmp_path / "bot.log", "bot", env=bot_env)
        procs["agent"] = spawn(settings, tmp_path / "agent.log", "agent", "--watch", f"exp01={train_log}")
        procs["simulate"] = spawn(settings, tmp_path / "simulate.log", "simulate", "--runs", str(SIM_RUNS),
                                  "--rate", "5")  # fmt: skip
        wait_for(lambda: decisions(store, "exp01"), timeout=60, what="the worker's first decision on exp01")
        # every simulated run has events before Redis goes: on a cold machine `simulate` starts slower than
        # the daemons, and a run with no event before the outage has nothing to be evaluated to
        runs = [f"sim-{i:05d}" for i in range(SIM_RUNS)]
        wait_for(lambda: all(store.redis.xlen(store.keys.log(run)) for run in runs), timeout=60,
                 what="every simulated run publishing")  # fmt: skip

        wait_for(lambda: worker_busy(store.redis), timeout=20, interval=0.005, what="the worker busy with a job")
        shutdown(own_redis)
        time.sleep(2)  # Redis stays down a while: every daemon hits the outage
        own_redis.start()  # same port, same data directory

        with open(train_log, "a") as f:
            f.write("step=2 loss=nan\n")
        wait_for(lambda: "STOP" in decisions(store, "exp01"), timeout=45, what="the NaN after the restart stopped")
        alive = {name: procs[name].poll() is None for name in DAEMONS}
        assert alive == dict.fromkeys(DAEMONS, True)
        wait_for(lambda: any("STOP exp01" in text for text in posted()), timeout=20, what="the STOP posted")
        # the job Redis failed mid-way is redone: every simulated run's log is evaluated to its end
        wait_for(lambda: all(evaluated_to_end(store, run) for run in runs), timeout=30, what="every run evaluated")
    finally:
        for proc in procs.values():
            stop_process(proc)
        for name in (*DAEMONS, "simulate"):  # shown by pytest only when the test fails
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])
    for name in DAEMONS:  # a stop request is a clean exit, not a crash
        assert procs[name].returncode == 0, name
        # an outage is a few warning lines (gone, back), not a traceback per run of a busy job (a forked
        # work horse that Redis fails may still log RQ's own traceback of the job)
        if not (fork and name == "worker"):
            assert "Traceback" not in (tmp_path / f"{name}.log").read_text(errors="replace"), name


LONG_RUNS = 6
EVENTS_PER_RUN = 6000


def test_a_job_redis_broke_is_redone_for_runs_that_get_no_new_events(own_redis: RedisServer, tmp_path: Path) -> None:
    """CI item: a job Redis failed mid-way is redone although nothing new arrives for its runs afterwards.

    Every event is in the logs before the daemons start, and nothing is published after the restart, so only
    the feed entries the broken job left unacknowledged can bring its runs up to date: the dispatcher claims
    them again once they are `reclaim_idle_s` old and gives them a new job. Long logs keep the worker busy for
    seconds, so Redis goes down in the middle of a job, not between two."""
    settings = tmp_path / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": own_redis.url, "host": "testhost", "evidence_dir": str(tmp_path / "evidence"),
        "findings_file": str(tmp_path / "findings.md"),
        "workers": {"reclaim_idle_s": 1, "lock_timeout_s": 2, "runs_per_job": LONG_RUNS},
    }))  # fmt: skip
    store = EventStore(own_redis.client(socket_timeout=5), keys=Keys())
    runs = [f"long-{i}" for i in range(LONG_RUNS)]
    for run in runs:
        for start in range(0, EVENTS_PER_RUN, 1000):
            store.append([metric(run, seq, loss=2.0 - seq / EVENTS_PER_RUN) for seq in range(start, start + 1000)])
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        procs["worker"] = spawn(settings, tmp_path / "worker.log", "worker")
        procs["dispatcher"] = spawn(settings, tmp_path / "dispatcher.log", "dispatcher")
        wait_for(lambda: worker_busy(store.redis), timeout=60, interval=0.005, what="the worker busy with a job")
        assert not all(evaluated_to_end(store, run) for run in runs)
        shutdown(own_redis)
        time.sleep(2)
        own_redis.start()
        wait_for(lambda: all(_safe(lambda run=run: evaluated_to_end(store, run)) for run in runs), timeout=90,
                 what="every run evaluated to its end after the restart, with no new event")  # fmt: skip
        assert all(procs[name].poll() is None for name in procs)
        # the outage broke a job in the middle (else this test would not test its redoing)
        assert "remaining runs stay pending and are retried" in (tmp_path / "worker.log").read_text(errors="replace")
    finally:
        for proc in procs.values():
            stop_process(proc)
        for name in procs:  # shown by pytest only when the test fails
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])


def _safe(check: Callable[[], bool]) -> bool:
    """`check()`, False while Redis is away."""
    try:
        return check()
    except (redis.RedisError, StoreError):
        return False

"""Daemons keep going through a Redis restart, and nothing is lost or doubled.

The agent tests write 10,000 metric lines in batches, each batch once the agent has read the
previous one, so the outage or the kill lands in the middle of the run.
"""

import os
import signal
import threading

import pytest
import yaml
from rq import Queue
from trainwarden.agent.publisher import Publisher
from trainwarden.agent.runner import Agent, AgentConfig
from trainwarden.agent.spool import Spool
from trainwarden.agent.watch import RunWatch
from trainwarden.events import types as t
from trainwarden.events.errors import StoreUnavailable
from trainwarden.events.store import EventStore
from trainwarden.workers.dispatcher import Dispatcher

from tests.conftest import spawn, stop_process
from tests.helpers import events_of, metric, wait_for
from trainwarden.tools.redis_server import RedisServer

pytestmark = pytest.mark.redis

LINES = 10_000
BATCH = 50


@pytest.fixture
def own_redis(tmp_path):
    """A redis-server of this test's own, stopped and started again on the same port and data."""
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def restart(server: RedisServer) -> None:
    server.stop()  # SIGTERM: Redis fsyncs its AOF before exiting
    server.start()


def test_dispatcher_survives_a_redis_restart(own_redis):
    client = own_redis.client(socket_timeout=2)
    store = EventStore(client)
    queue = Queue("tw-outage", connection=client)
    dispatcher = Dispatcher(store=store, queue=queue, consumer="d1")
    stop = threading.Event()
    thread = threading.Thread(target=dispatcher.run, kwargs={"stop": stop}, daemon=True)
    thread.start()
    try:
        store.append([metric("run-a", 1, loss=1.0)])
        wait_for(lambda: queue.count == 1, what="first job")
        restart(own_redis)
        wait_for(lambda: _append_ok(store, metric("run-b", 1, loss=1.0)), what="Redis back")
        wait_for(lambda: queue.count == 2, what="second job after the restart")
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(timeout=5)


def write_batch(log, batch: int) -> None:
    with open(log, "a") as f:
        f.write("".join(f"step={i} loss=1.0\n" for i in range(batch * BATCH, (batch + 1) * BATCH)))


def test_redis_restart_in_the_middle_of_10000_lines_delivers_each_once_in_order(own_redis, tmp_path):
    client = own_redis.client(socket_timeout=1, socket_connect_timeout=0.5)
    store = EventStore(client)
    log = tmp_path / "train.log"
    log.touch()
    spool = Spool(tmp_path / "spool")
    agent = Agent(publisher=Publisher(store, spool=spool), host="gpu1", watches=[RunWatch(run="exp01", log=log)],
                  state_path=tmp_path / "state.json", config=AgentConfig(poll_interval_s=0.01))  # fmt: skip
    tail = agent.watchers["exp01"].log.tail
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, kwargs={"stop": stop}, daemon=True)
    thread.start()
    spooled_during_outage = 0
    try:
        for batch in range(LINES // BATCH):
            write_batch(log, batch)
            wait_for(lambda: tail.offset == log.stat().st_size, what=f"batch {batch} read")
            if batch == 60:
                own_redis.stop()
            if batch == 140:
                wait_for(lambda: not agent.publisher.buffer, what="the outage's events in the spool")
                spooled_during_outage = len(spool)
                own_redis.start()
        wait_for(lambda: _count(store, "exp01") == LINES, timeout=60, what="every line delivered")
    finally:
        stop.set()
        thread.join(timeout=10)
    assert spooled_during_outage > 0
    steps = [e.data["step"] for e in events_of(store, "exp01", t.METRIC)]
    assert steps == list(range(LINES))
    assert spool.empty


def test_agent_killed_and_restarted_resumes_without_duplicates_or_gaps(settings_file, store, tmp_path):
    log = tmp_path / "train.log"
    log.touch()
    agent = spawn(settings_file, tmp_path / "agent.log", "agent", "--watch", f"exp01={log}")
    try:
        for batch in range(LINES // BATCH):
            write_batch(log, batch)
            if batch == 80:
                wait_for(lambda: _count(store, "exp01") >= 2000, timeout=30, what="half the run delivered")
                os.killpg(agent.pid, signal.SIGKILL)
                agent.wait()
            if batch == 120:
                agent = spawn(settings_file, tmp_path / "agent.log", "agent", "--watch", f"exp01={log}")
        wait_for(lambda: _count(store, "exp01") == LINES, timeout=60, what="every line delivered")
    finally:
        stop_process(agent)
    steps = [e.data["step"] for e in events_of(store, "exp01", t.METRIC)]
    assert steps == list(range(LINES))


def test_spooled_events_survive_an_agent_kill_while_redis_is_down(own_redis, tmp_path):
    settings = tmp_path / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": own_redis.url, "host": "gpu1",
        "agent": {"state_file": str(tmp_path / "state.json"), "poll_interval_s": 0.02, "nvml": False},
    }))  # fmt: skip
    log = tmp_path / "train.log"
    write_batch(log, 0)
    store = EventStore(own_redis.client(socket_timeout=1))
    agent = spawn(settings, tmp_path / "agent.log", "agent", "--watch", f"exp01={log}")
    try:
        wait_for(lambda: _count(store, "exp01") == BATCH, what="first batch delivered")
        own_redis.stop()
        for batch in range(1, 20):
            write_batch(log, batch)
        spool = tmp_path / "spool" / "spool.jsonl"
        wait_for(lambda: spool.exists() and spool.read_bytes().count(b'"step":999') == 1, what="the outage spooled")
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait()
        agent = spawn(settings, tmp_path / "agent.log", "agent", "--watch", f"exp01={log}")
        own_redis.start()
        wait_for(lambda: _count(store, "exp01") == 20 * BATCH, timeout=30, what="spool replayed")
    finally:
        stop_process(agent)
    assert [e.data["step"] for e in events_of(store, "exp01", t.METRIC)] == list(range(20 * BATCH))


def _append_ok(store, event) -> bool:
    try:
        store.append([event])
    except StoreUnavailable:
        return False
    return True


def _count(store, run) -> int:
    try:
        return len(events_of(store, run, t.METRIC))
    except StoreUnavailable:
        return -1

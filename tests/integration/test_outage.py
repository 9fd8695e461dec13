"""Daemons keep going through a Redis restart, and nothing is lost or doubled."""

import threading

import pytest
from rq import Queue

from agent.publisher import Publisher
from agent.runner import Agent, LogWatch
from events.errors import StoreUnavailable
from events.store import EventStore
from tests.helpers import events_of, metric, wait_for
from trainwarden.redis_server import RedisServer
from workers.dispatcher import Dispatcher

pytestmark = pytest.mark.redis


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


def test_agent_keeps_lines_written_while_redis_is_down(own_redis, tmp_path):
    client = own_redis.client(socket_timeout=1, socket_connect_timeout=0.5)
    store = EventStore(client)
    log = tmp_path / "train.log"
    log.write_text("".join(f"step={i} loss=1.0\n" for i in range(100)))
    agent = Agent(publisher=Publisher(store), host="gpu1", watches=[LogWatch("exp01", log)],
                  state_path=tmp_path / "offsets.json", poll_interval=0.01)  # fmt: skip
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, kwargs={"stop": stop}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: store.length("exp01") == 100, what="first 100 lines")
        own_redis.stop()
        with open(log, "a") as f:
            f.write("".join(f"step={i} loss=1.0\n" for i in range(100, 200)))
        wait_for(lambda: len(agent.publisher.buffer) == 100, what="lines buffered during the outage")
        own_redis.start()
        wait_for(lambda: _length(store, "exp01") == 200, what="buffered lines delivered")
    finally:
        stop.set()
        thread.join(timeout=5)
    assert [e.data["step"] for e in events_of(store, "exp01")] == list(range(200))


def _append_ok(store, event) -> bool:
    try:
        store.append([event])
    except StoreUnavailable:
        return False
    return True


def _length(store, run) -> int:
    try:
        return store.length(run)
    except StoreUnavailable:
        return -1

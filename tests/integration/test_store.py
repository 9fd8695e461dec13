"""The event store on a real redis-server."""

import math

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from trainwarden.agent.publisher import Publisher
from trainwarden.events.errors import StoreUnavailable
from trainwarden.events.store import EventStore

from tests.helpers import FaultyProxy, events_of, metric, wait_for

pytestmark = pytest.mark.redis


def test_append_and_read_back_in_order(store):
    events = [metric("exp01", i, step=i, loss=1.0 / i) for i in range(1, 101)]
    sids = store.append(events)
    assert all(sids)
    assert [e for _, e in store.iter_run("exp01", page=7)] == events
    assert store.length("exp01") == 100


def test_reads_are_per_run_and_ordered(store):
    mixed = [metric("a" if i % 2 else "b", i, producer="p", step=i) for i in range(1, 21)]
    store.append(mixed)
    assert [e.seq for e in events_of(store, "a")] == list(range(1, 21, 2))
    assert [e.seq for e in events_of(store, "b")] == list(range(2, 21, 2))


def test_same_event_twice_is_stored_once(store):
    event = metric("exp01", 5, loss=1.0)
    assert store.append([event])[0] is not None
    assert store.append([event]) == [None]
    assert store.length("exp01") == 1


def test_replayed_batch_stores_only_the_missing_tail(store):
    events = [metric("exp01", i, loss=1.0) for i in range(1, 11)]
    store.append(events[:6])
    results = store.append(events)
    assert results[:6] == [None] * 6
    assert all(results[6:])
    assert [e.seq for e in events_of(store, "exp01")] == list(range(1, 11))


def test_high_water_marks_are_per_producer(store):
    store.append([metric("exp01", 10, producer="agent-a", loss=1.0)])
    assert store.append([metric("exp01", 3, producer="agent-b", loss=1.0)])[0] is not None
    assert store.append([metric("exp01", 3, producer="agent-a", loss=1.0)]) == [None]


def test_seqs_beyond_double_precision_compare_exactly(store):
    big = 2**60
    store.append([metric("exp01", big, loss=1.0)])
    assert store.append([metric("exp01", big + 1, loss=1.0)])[0] is not None
    assert store.append([metric("exp01", big, loss=1.0)]) == [None]


def test_nan_survives_the_store(store):
    store.append([metric("exp01", 1, loss=math.nan)])
    assert math.isnan(events_of(store, "exp01")[0].data["loss"])


def test_each_batch_writes_one_feed_entry_per_run(store, r):
    store.append([metric("a", 1, loss=1.0), metric("b", 1, loss=1.0), metric("a", 2, loss=1.0)])
    feed = r.xrange(store.keys.feed())
    assert len(feed) == 2
    fields = {f[b"r"]: f for _, f in feed}
    a_sids = [sid for sid, _ in store.iter_run("a")]
    assert (fields[b"a"][b"f"].decode(), fields[b"a"][b"l"].decode()) == (a_sids[0], a_sids[-1])
    assert fields[b"a"][b"t"] == b"metric"
    assert store.append([metric("a", 1, loss=1.0)]) == [None]
    assert len(r.xrange(store.keys.feed())) == 2  # a batch of duplicates adds no feed entry


def test_runs_index(store):
    store.append([metric("a", 1, loss=1.0), metric("b", 2, loss=1.0)])
    assert [name for name, _ in store.runs()] == ["b", "a"]


def test_script_reloaded_after_script_flush(store, r):
    store.append([metric("exp01", 1, loss=1.0)])
    r.script_flush()
    assert store.append([metric("exp01", 2, loss=1.0)])[0] is not None


def test_append_retried_after_a_timeout_is_stored_once(redis_server, r):
    """Redis runs the append but the reply is lost; the publisher retries; the event is stored once."""
    proxy = FaultyProxy(redis_server.port)
    try:
        no_retry = Retry(NoBackoff(), 0)  # the publisher's own retry is what is under test
        client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=0.3, retry=no_retry)
        direct = EventStore(redis_server.client())
        publisher = Publisher(EventStore(client))
        publisher.publish([metric("exp01", 1, loss=1.0)])
        publisher.flush()  # warm up: the script is now cached server-side
        proxy.swallow_replies = True
        publisher.publish([metric("exp01", 2, loss=2.0)])
        with pytest.raises(StoreUnavailable):
            publisher.flush()
        assert publisher.buffer  # nothing dropped
        wait_for(lambda: direct.length("exp01") == 2, what="the swallowed append to land")
        proxy.swallow_replies = False
        publisher.flush()
        assert direct.length("exp01") == 2
        assert publisher.duplicates == 1
        assert not publisher.buffer
    finally:
        proxy.close()


def test_unreachable_redis_raises_a_retryable_error():
    store = EventStore(redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2))
    with pytest.raises(StoreUnavailable) as info:  # the class callers retry on
        store.append([metric("exp01", 1, loss=1.0)])
    assert "Redis unreachable" in str(info.value)

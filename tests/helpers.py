"""Test helpers: polling with a deadline (never fixed sleeps), event builders, a faulty TCP proxy."""

from __future__ import annotations

import math
import select
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.store import EventStore, Malformed

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], *, timeout: float = 15.0, interval: float = 0.02, what: str = "") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def metric(run: str, seq: int, *, producer: str | None = None, host: str = "gpu1", **values: Any) -> Event:
    return make_event(t.METRIC, run=run, host=host, producer=producer or f"{host}/log/{run}/g0", seq=seq, data=values,
                      ts=1000.0 + seq)  # fmt: skip


def nan_metric(run: str, seq: int, **extra: Any) -> Event:
    return metric(run, seq, step=seq, loss=math.nan, **extra)


def events_of(store: EventStore, run: str, event_type: str | None = None) -> list[Event]:
    return [
        e
        for _, e in store.iter_run(run)
        if not isinstance(e, Malformed) and (event_type is None or e.type == event_type)
    ]


class FaultyProxy:
    """A loopback TCP proxy in front of Redis that can swallow replies (the request still reaches
    Redis and runs; the client times out): the exact case where a retry must not duplicate."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.swallow_replies = False
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        sockets = [client, upstream]
        try:
            while not self._closed.is_set():
                readable, _, _ = select.select(sockets, [], [], 0.1)
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is client:
                        upstream.sendall(data)
                    elif not self.swallow_replies:
                        client.sendall(data)
        except OSError:
            return
        finally:
            client.close()
            upstream.close()

    def close(self) -> None:
        self._closed.set()
        self.listener.close()


def evaluated_to_end(store: EventStore, run: str) -> bool:
    """The workers' checkpoint of `run` has evaluated its whole log."""
    from trainwarden.events.redis_types import hash_fields
    from trainwarden.workers.checkpoint import decode_checkpoint

    last = store.redis.xrevrange(store.keys.log(run), count=1)
    cp = decode_checkpoint(hash_fields(store.redis.hgetall(store.keys.cursor(run))))
    return bool(last) and cp.after == last[0][0].decode()


REAL_CORPUS = Path(__file__).resolve().parent / "data" / "real"


def dev_corpus() -> list[dict[str, Any]]:
    """The corpus's development part (tests/data/real/MANIFEST.yaml): the runs tests may hold the reader and
    the rules to, file by file. The held-out test part is only scored (tests/integration/test_corpus_scorecard.py),
    never asserted run by run: a per-file test on it would be tuning on it."""
    import yaml

    from trainwarden.tools.corpus import DEV

    runs = yaml.safe_load((REAL_CORPUS / "MANIFEST.yaml").read_text())["runs"]
    return [r for r in runs if r.get("part", DEV) == DEV]


def dispatcher_for(store: Any, queue: Any, **options: Any) -> Any:
    """A dispatcher on `queue` that reclaims stale entries after 100 ms, its consumer groups made."""
    from trainwarden.workers.dispatcher import Dispatcher

    d = Dispatcher(store=store, queue=queue, consumer="d1", reclaim_idle_ms=100, **options)
    d.setup()
    return d

"""The only place that builds objects from settings and hands them to each other."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import redis
from rq import Queue

from agent.publisher import Publisher
from agent.runner import Agent, LogWatch
from bot.notifier import Notifier, Sink
from events.keys import Keys
from events.store import EventStore
from policies.default import default_policy
from trainwarden.settings import Settings
from workers.context import WorkerContext
from workers.dispatcher import Dispatcher
from workers.transport import LocalTmuxController


def consumer_name(role: str) -> str:
    return f"{role}-{socket.gethostname()}-{os.getpid()}"


def events_redis(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(
        settings.redis_url, socket_timeout=30, socket_connect_timeout=5, health_check_interval=30
    )


def rq_redis(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(settings.rq_redis_url or settings.redis_url, socket_connect_timeout=5)


def store(settings: Settings, client: redis.Redis | None = None) -> EventStore:
    return EventStore(client or events_redis(settings), keys=Keys(settings.namespace))


def queue(settings: Settings, client: redis.Redis | None = None) -> Queue:
    return Queue(settings.queue, connection=client or rq_redis(settings))


def agent(settings: Settings, *, watches: tuple[LogWatch, ...] | None = None, state_file: Path | None = None) -> Agent:
    return Agent(
        publisher=Publisher(store(settings)),
        host=settings.host,
        watches=list(settings.watches if watches is None else watches),
        state_path=state_file or settings.agent_state_file,
        poll_interval=settings.agent_poll_interval_s,
    )


def dispatcher(settings: Settings) -> Dispatcher:
    return Dispatcher(
        store=store(settings),
        queue=queue(settings),
        consumer=consumer_name("dispatcher"),
        reclaim_idle_ms=int(settings.reclaim_idle_s * 1000),
        job_timeout_s=settings.job_timeout_s,
    )


def worker_context(settings: Settings) -> WorkerContext:
    return WorkerContext(
        store=store(settings),
        host=settings.host,
        policy=default_policy(),
        controller=LocalTmuxController(),
        evidence_dir=settings.evidence_dir.resolve(),
        lock_timeout_s=settings.lock_timeout_s,
    )


def notifier(settings: Settings, sink: Sink) -> Notifier:
    return Notifier(
        store=store(settings),
        sink=sink,
        consumer=consumer_name("notifier"),
        reclaim_idle_ms=int(settings.reclaim_idle_s * 1000),
    )

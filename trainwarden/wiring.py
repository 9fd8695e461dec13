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
from trainwarden import defaults
from trainwarden.settings import Settings
from workers.context import WorkerContext
from workers.dispatcher import Dispatcher
from workers.policy_source import PolicySource
from workers.schedule import Ticker, TickSettings
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
    events = store(settings)
    return Dispatcher(
        store=events,
        queue=queue(settings),
        consumer=consumer_name("dispatcher"),
        reclaim_idle_ms=int(settings.reclaim_idle_s * 1000),
        job_timeout_s=settings.job_timeout_s,
        ticker=Ticker(store=events, host=settings.host, retry_s=settings.tick_steady_s),
        tick_check_s=defaults.TICK_CHECK_S,
    )


def policy_source(settings: Settings) -> PolicySource:
    """The configured policy file (PolicyError if it is invalid), or the packaged default."""
    return PolicySource(host=settings.host, path=settings.policy_path)


def worker_context(settings: Settings) -> WorkerContext:
    return WorkerContext(
        store=store(settings),
        host=settings.host,
        policies=policy_source(settings),
        controller=LocalTmuxController(),
        evidence_dir=settings.evidence_dir.resolve(),
        findings_file=settings.findings_file.resolve(),
        ticks=tick_settings(settings),
        lock_timeout_s=settings.lock_timeout_s,
    )


def tick_settings(settings: Settings) -> TickSettings:
    return TickSettings(startup_s=settings.tick_startup_s, steady_s=settings.tick_steady_s,
                        max_silence_s=settings.tick_max_silence_s)  # fmt: skip


def notifier(settings: Settings, sink: Sink) -> Notifier:
    return Notifier(
        store=store(settings),
        sink=sink,
        consumer=consumer_name("notifier"),
        reclaim_idle_ms=int(settings.reclaim_idle_s * 1000),
    )

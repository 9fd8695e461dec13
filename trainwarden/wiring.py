"""The only place that builds objects from settings and hands them to each other."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import redis
from rq import Queue

from agent.control import ControlReader
from agent.errors import GpuUnavailable
from agent.gpu import GpuSampler
from agent.publisher import Publisher
from agent.runner import Agent, AgentConfig
from agent.spool import Spool
from agent.wandb_source import PublicApi
from agent.watch import RunWatch
from agent.watcher import WatchOptions
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


def gpu_sampler(settings: Settings) -> tuple[GpuSampler | None, str | None]:
    """NVML, or (None, why not): the agent then says so in a `source.status` event and goes on."""
    if not settings.agent_nvml:
        return None, "GPU sampling is turned off (agent.nvml: false)"
    from agent.nvml import NvmlSampler

    try:
        return NvmlSampler(), None
    except GpuUnavailable as exc:
        return None, str(exc)


def agent(
    settings: Settings,
    *,
    watches: tuple[RunWatch, ...] | None = None,
    state_file: Path | None = None,
    gpu: GpuSampler | None = None,
) -> Agent:
    client = events_redis(settings)
    event_store = store(settings, client)
    state_path = state_file or settings.agent_state_file
    spool = Spool(settings.agent_spool_dir or state_path.parent / "spool",
                  max_bytes=int(settings.agent_spool_max_mb * 2**20))  # fmt: skip
    problem = None
    if gpu is None:
        gpu, problem = gpu_sampler(settings)
    api_key = os.environ.get("WANDB_API_KEY")
    config = AgentConfig(
        poll_interval_s=settings.agent_poll_interval_s,
        gpu_interval_s=settings.agent_gpu_interval_s,
        process_interval_s=settings.agent_process_interval_s,
        heartbeat_interval_s=settings.agent_heartbeat_interval_s,
        watch=WatchOptions(
            wandb_stale_s=settings.agent_wandb_stale_s,
            wandb_api_interval_s=settings.agent_wandb_api_interval_s,
            wandb_base_url=settings.agent_wandb_base_url,
        ),
    )
    return Agent(
        publisher=Publisher(event_store, spool=spool),
        host=settings.host,
        watches=settings.watches if watches is None else watches,
        state_path=state_path,
        config=config,
        gpu=gpu,
        gpu_problem=problem,
        control=ControlReader(client, event_store.keys.agent_control(settings.host)),
        wandb_api=PublicApi(api_key=api_key) if api_key else None,
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

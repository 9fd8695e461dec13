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
from trainwarden.errors import ConfigError
from trainwarden.settings import Settings
from workers.context import WorkerContext
from workers.dispatcher import Dispatcher
from workers.fleet import Fleet, experiment_files, load_fleet
from workers.planner import PlanRunner
from workers.policy_source import PolicySource
from workers.remote_control import SshController
from workers.remote_launch import RemoteLauncher
from workers.schedule import Ticker, TickSettings
from workers.ssh import SshPool
from workers.transport import LocalTmuxController, RoutingController, RunController

SECRET_ENV_FOR_RUNS = ("WANDB_API_KEY",)  # copied into each remote run's 0600 env file
_ssh_pool = SshPool()


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


def fleet(settings: Settings, *, required: bool = False) -> Fleet | None:
    """Servers and experiments, when the settings name a servers file."""
    if settings.servers_file is None:
        if required:
            raise ConfigError("no servers configured: set servers_file (and experiments_dir) in the settings file")
        return None
    directory = settings.experiments_dir or settings.servers_file.parent / "experiments"
    return load_fleet(settings.servers_file, experiment_files(directory))


def ssh_pool() -> SshPool:
    return _ssh_pool


def remote_launcher(settings: Settings, the_fleet: Fleet, client_store: EventStore | None = None) -> RemoteLauncher:
    secrets = {name: os.environ[name] for name in SECRET_ENV_FOR_RUNS if os.environ.get(name)}
    return RemoteLauncher(shell=ssh_pool(), store=client_store or store(settings), fleet=the_fleet,
                          host=settings.host, secrets=secrets)  # fmt: skip


def controller(the_fleet: Fleet | None) -> RunController:
    remote = SshController(shell=ssh_pool(), servers=the_fleet.servers) if the_fleet else None
    return RoutingController(local=LocalTmuxController(), remote=remote)


def plan_runner(settings: Settings, the_fleet: Fleet) -> PlanRunner:
    shared = store(settings)
    return PlanRunner(store=shared, launcher=remote_launcher(settings, the_fleet, shared), shell=ssh_pool(),
                      fleet=the_fleet, host=settings.host)  # fmt: skip


def worker_context(settings: Settings) -> WorkerContext:
    the_fleet = fleet(settings)
    shared = store(settings)
    return WorkerContext(
        store=shared,
        host=settings.host,
        policies=policy_source(settings),
        controller=controller(the_fleet),
        evidence_dir=settings.evidence_dir.resolve(),
        findings_file=settings.findings_file.resolve(),
        ticks=tick_settings(settings),
        lock_timeout_s=settings.lock_timeout_s,
        launcher=remote_launcher(settings, the_fleet, shared) if the_fleet else None,
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

"""The only place that builds objects from settings and hands them to each other."""

from __future__ import annotations

import datetime
import importlib.metadata
import logging
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from trainwarden import writable
from trainwarden.core.errors import ConfigError
from trainwarden.events.connect import QueueClient, event_log_client, is_cluster_url, queue_client
from trainwarden.events.errors import StoreUnavailable
from trainwarden.events.health import ping
from trainwarden.events.heartbeat import SILENT_INTERVALS, Heartbeat, LastErrorHandler, Liveness
from trainwarden.events.keys import Keys
from trainwarden.events.lease import Lease
from trainwarden.events.redis_types import Client
from trainwarden.events.silence import Pulse, SilenceWatch
from trainwarden.events.store import EventStore
from trainwarden.extras import require
from trainwarden.settings import Settings

SECRET_ENV_FOR_RUNS = ("WANDB_API_KEY",)  # copied into each remote run's 0600 env file

# Each process imports only what it runs (the agent needs neither rq nor asyncssh; the `server` and
# `bot` extras may be missing), so the builders below import their parts themselves.
if TYPE_CHECKING:
    from rq import Queue
    from slack_sdk import WebClient

    from trainwarden.agent.gpu import GpuSampler
    from trainwarden.agent.runner import Agent
    from trainwarden.agent.watch import RunWatch
    from trainwarden.bot.handlers import Launcher
    from trainwarden.bot.notifier import Notifier
    from trainwarden.bot.service import SlackBot
    from trainwarden.bot.sink import Sink
    from trainwarden.bot.slack_sink import SlackSink
    from trainwarden.remote.fleet import Fleet
    from trainwarden.remote.launch import RemoteLauncher
    from trainwarden.remote.planner import PlanRunner
    from trainwarden.remote.ssh import SshPool
    from trainwarden.remote.stop import RunController
    from trainwarden.workers.context import WorkerContext
    from trainwarden.workers.dispatcher import Dispatcher
    from trainwarden.workers.policy_source import PolicySource
    from trainwarden.workers.schedule import TickSettings

_ssh_pool: SshPool | None = None  # one per process, made on first use


def consumer_name(role: str) -> str:
    return f"{role}-{socket.gethostname()}-{os.getpid()}"


def events_redis(settings: Settings) -> Client:
    """The event log's Redis: one server (`redis://`), or a Redis Cluster (`redis+cluster://` and
    any one node's address; the client discovers the others)."""
    return events_redis_at(settings.redis_url)


def events_redis_at(url: str) -> Client:
    """The event log's client for a URL alone: for processes given a URL, not settings (simulate's producers)."""
    return event_log_client(url)


def rq_redis(settings: Settings) -> QueueClient:
    """RQ's queues: a single Redis (RQ does not run on a cluster), by default the event log's."""
    url = settings.rq_redis_url or settings.redis_url
    if is_cluster_url(url):
        raise ConfigError(
            f"RQ's queues need a single Redis, not the cluster at {url}: set RQ_REDIS_URL (or rq_redis_url in the "
            "settings file) to a plain redis:// URL"
        )
    return queue_client(url)


def heartbeat(settings: Settings, role: str, client: Client | None = None) -> Heartbeat:
    """This process's heartbeat hash; its last error is whatever it logs at WARNING or worse."""
    beat = Heartbeat(client=client or events_redis(settings), keys=Keys(settings.namespace), role=role,
                     host=settings.host, version=importlib.metadata.version("trainwarden"),
                     interval_s=settings.heartbeat_interval_s, lag_of=LAG_OF.get(role, ""))  # fmt: skip
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, LastErrorHandler) and h.heartbeat.role == role]:
        root.removeHandler(old)  # built again in this process (the demo, tests): the newest one reports
    root.addHandler(LastErrorHandler(beat))
    return beat


def pulse(settings: Settings, role: str, events: EventStore, *, watch: bool = True) -> Pulse:
    """Heartbeat plus, for the central daemons (`watch`), the watch that posts silent components."""
    beat = heartbeat(settings, role, events.redis)
    return Pulse(beat, silence=SilenceWatch(store=events, host=settings.host) if watch else None)


LAG_OF = {"dispatcher": "feed lag", "notifier": "feed lag", "worker": "queue wait", "agent": "spool backlog"}


def check_redis(settings: Settings, *, rq: bool = False) -> None:
    """Reach the event log's Redis (and RQ's) once at start: wrong credentials stop a daemon here, in one
    line (StoreAuthFailed), instead of a retry loop; an unreachable Redis is left to the loops' backoff."""
    clients: list[Client] = [events_redis(settings)]
    if rq and settings.rq_redis_url and settings.rq_redis_url != settings.redis_url:
        clients.append(rq_redis(settings))
    for client in clients:
        try:
            ping(client)
        except StoreUnavailable:
            pass
        finally:
            client.close()


def queue_wait(queue: Queue) -> float:
    """How long the oldest job in RQ's queue has waited (0 for an empty queue): the workers' lag."""
    ids = queue.get_job_ids(0, 1)
    job = queue.fetch_job(ids[0]) if ids else None
    if job is None or job.enqueued_at is None:
        return 0.0
    at = job.enqueued_at if job.enqueued_at.tzinfo else job.enqueued_at.replace(tzinfo=datetime.UTC)
    return max(0.0, time.time() - at.timestamp())


def store(settings: Settings, client: Client | None = None) -> EventStore:
    return EventStore(client or events_redis(settings), keys=Keys(settings.namespace))


def queue(settings: Settings, client: QueueClient | None = None) -> Queue:
    from rq import Queue

    return Queue(settings.queue, connection=client or rq_redis(settings))


def gpu_sampler(settings: Settings) -> tuple[GpuSampler | None, str | None]:
    """NVML, or (None, why not): the agent then says so in a `source.status` event and goes on."""
    from trainwarden.agent.errors import GpuUnavailable

    if not settings.agent_nvml:
        return None, "GPU sampling is turned off (agent.nvml: false)"
    from trainwarden.agent.nvml import NvmlSampler

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
    lease: Lease | None = None,
) -> Agent:
    from trainwarden.agent.control import ControlReader
    from trainwarden.agent.publisher import Publisher
    from trainwarden.agent.runner import Agent, AgentConfig
    from trainwarden.agent.spool import Spool
    from trainwarden.agent.wandb_source import PublicApi
    from trainwarden.agent.watcher import WatchOptions

    client = events_redis(settings)
    event_store = store(settings, client)
    state_path = state_file or settings.agent_state_file
    spool = Spool(writable.spool_dir(settings, state_path), max_bytes=int(settings.agent_spool_max_mb * 2**20))
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
            unreadable_after_s=settings.agent_unreadable_after_s,
            unreadable_after_lines=settings.agent_unreadable_after_lines,
            first_step_budget_s=settings.agent_first_step_budget_s,
            rotate_wait_s=settings.agent_rotate_wait_s,
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
        pulse=pulse(settings, "agent", event_store, watch=False),
        lease=lease,
    )


def agent_lease(settings: Settings) -> Lease:
    """The host's agent lease: one agent per host watches and stops its runs (events/agent_lease.py)."""
    from trainwarden.events.agent_lease import agent_lease as lease_of

    client = events_redis(settings)
    return lease_of(client, store(settings, client).keys, settings.host, ttl_s=settings.agent_lease_s)


def dispatcher(settings: Settings) -> Dispatcher:
    from trainwarden.workers.dispatcher import Dispatcher
    from trainwarden.workers.schedule import Ticker

    events = store(settings)
    return Dispatcher(
        store=events,
        queue=queue(settings),
        consumer=consumer_name("dispatcher"),
        reclaim_idle_ms=int(settings.reclaim_idle_s * 1000),
        job_timeout_s=settings.job_timeout_s,
        runs_per_job=settings.runs_per_job,
        ticker=Ticker(store=events, host=settings.host, retry_s=settings.tick_steady_s),
        pulse=pulse(settings, "dispatcher", events),
    )


def policy_source(settings: Settings, events: EventStore) -> PolicySource:
    """The configured policy file (if it is invalid: the last valid policy recorded in `events`), or the default."""
    from trainwarden.workers.policy_source import PolicySource, last_recorded_policy

    return PolicySource(host=settings.host, path=settings.policy_path, recorded=lambda: last_recorded_policy(events))


def fleet(settings: Settings, *, required: bool = False) -> Fleet | None:
    """Servers and experiments, when the settings name a servers file."""
    from trainwarden.remote.fleet import experiment_files, load_fleet

    if settings.servers_file is None:
        if required:
            raise ConfigError("no servers configured: set servers_file (and experiments_dir) in the settings file")
        return None
    directory = settings.experiments_dir or settings.servers_file.parent / "experiments"
    return load_fleet(settings.servers_file, experiment_files(directory))


def ssh_pool() -> SshPool:
    from trainwarden.remote.ssh import SshPool

    global _ssh_pool  # noqa: PLW0603 (one pool per process, made only where SSH is used)
    if _ssh_pool is None:
        _ssh_pool = SshPool()
    return _ssh_pool


def remote_launcher(settings: Settings, the_fleet: Fleet, client_store: EventStore | None = None) -> RemoteLauncher:
    from trainwarden.remote.launch import RemoteLauncher

    secrets = {name: os.environ[name] for name in SECRET_ENV_FOR_RUNS if os.environ.get(name)}
    return RemoteLauncher(shell=ssh_pool(), store=client_store or store(settings), fleet=the_fleet,
                          host=settings.host, secrets=secrets)  # fmt: skip


def controller(the_fleet: Fleet | None) -> RunController:
    from trainwarden.remote.control import SshController
    from trainwarden.remote.stop import LocalTmuxController, RoutingController

    remote = SshController(shell=ssh_pool(), servers=the_fleet.servers) if the_fleet else None
    return RoutingController(local=LocalTmuxController(), remote=remote)


def plan_runner(settings: Settings, the_fleet: Fleet) -> PlanRunner:
    from trainwarden.remote.planner import PlanRunner

    shared = store(settings)
    return PlanRunner(store=shared, launcher=remote_launcher(settings, the_fleet, shared), shell=ssh_pool(),
                      fleet=the_fleet, host=settings.host)  # fmt: skip


def worker_context(settings: Settings) -> WorkerContext:
    from trainwarden.workers.context import WorkerContext

    the_fleet = fleet(settings)
    shared = store(settings)
    return WorkerContext(
        store=shared,
        host=settings.host,
        policies=policy_source(settings, shared),
        controller=controller(the_fleet),
        evidence_dir=settings.evidence_dir.resolve(),
        findings_file=settings.findings_file.resolve(),
        ticks=tick_settings(settings),
        lock_timeout_s=settings.lock_timeout_s,
        evidence_timeout_s=settings.evidence_timeout_s,
        breaker=settings.breaker,
        launcher=remote_launcher(settings, the_fleet, shared) if the_fleet else None,
    )


def tick_settings(settings: Settings) -> TickSettings:
    from trainwarden.workers.schedule import TickSettings

    return TickSettings(startup_s=settings.tick_startup_s, steady_s=settings.tick_steady_s,
                        max_silence_s=settings.tick_max_silence_s)  # fmt: skip


def liveness(settings: Settings) -> Liveness:
    """The notifier loop's liveness: its heartbeat is withheld after 3 intervals without progress or a declared wait."""
    return Liveness(stale_s=SILENT_INTERVALS * settings.heartbeat_interval_s)


def notifier(settings: Settings, sink: Sink, *, channel: str = "console") -> Notifier:
    from trainwarden.bot.deadman import Deadman
    from trainwarden.bot.notifier import Notifier
    from trainwarden.bot.stages import Pipeline

    events = store(settings)
    cfg = settings.slack
    alive = getattr(sink, "liveness", None)  # the Slack sink declares its waits to it
    return Notifier(
        store=events,
        sink=sink,
        # stable per host: a restarted notifier finishes its own pending entries first, in order
        consumer=f"notifier-{socket.gethostname()}",
        channel=channel,
        host=settings.host,
        pipeline=Pipeline(flap_threshold=cfg.flap_threshold, flap_window_s=cfg.flap_window_s),
        routes=cfg.routes,
        snooze_s=cfg.keep_running_snooze_s,
        stop_outcome_wait_s=cfg.stop_outcome_wait_s,
        reclaim_idle_ms=int(settings.reclaim_idle_s * 1000),
        deadman=Deadman(store=events, host=settings.host, stall_s=cfg.deadman_s),
        pulse=pulse(settings, "notifier", events),
        # one notifier at a time: the others stand by (bot/keeper.py)
        lease=Lease(events.redis, events.keys, "notifier", ttl_s=cfg.lease_s),
        liveness=alive if isinstance(alive, Liveness) else liveness(settings),
    )


def slack_client(env: Mapping[str, str]) -> WebClient:
    """The Web API client; SLACK_API_URL points it elsewhere (a proxy, or the tests' local server)."""
    from slack_sdk import WebClient

    from trainwarden.bot.slack_sink import SDK_LOG, TIMEOUT_S

    return WebClient(
        token=env["SLACK_BOT_TOKEN"],
        base_url=env.get("SLACK_API_URL") or WebClient.BASE_URL,
        retry_handlers=[],  # bot/slack_sink.py retries, reconciling first where a post may have landed
        timeout=TIMEOUT_S,
        logger=SDK_LOG,  # without an ERROR per try that could not reach Slack: the sink says the outage once
    )


def slack_sink(settings: Settings, env: Mapping[str, str], client: WebClient | None = None) -> SlackSink:
    from trainwarden.bot.slack_sink import RateLimiter, SlackSink

    cfg = settings.slack
    if not cfg.channel:
        raise ConfigError("SLACK_BOT_TOKEN is set but slack.channel is not: name the channel id to post to")
    limiter = RateLimiter(rate_per_s=cfg.rate_per_s, burst=cfg.burst)
    return SlackSink(client=client or slack_client(env), limiter=limiter, liveness=liveness(settings))


def slack_bot(
    settings: Settings, env: Mapping[str, str], *, the_fleet: Fleet | None = None, launcher: Launcher | None = None
) -> SlackBot:
    """The bot in Slack mode: SLACK_BOT_TOKEN set; Socket Mode with SLACK_APP_TOKEN, else HTTP."""
    from trainwarden.bot.app import build_app
    from trainwarden.bot.authz import Audit, Authorize
    from trainwarden.bot.handlers import Handlers
    from trainwarden.bot.launcher import FleetLauncher
    from trainwarden.bot.service import Endpoint, SlackBot, SocketModeEndpoint

    cfg = settings.slack
    secret = env.get("SLACK_SIGNING_SECRET")
    app_token = env.get("SLACK_APP_TOKEN")
    if not secret and not app_token:
        raise ConfigError("HTTP mode needs SLACK_SIGNING_SECRET (or set SLACK_APP_TOKEN for Socket Mode)")
    client = slack_client(env)
    sink = slack_sink(settings, env, client)
    events = store(settings)
    if the_fleet is None:
        the_fleet = fleet(settings)
    if launcher is None and the_fleet is not None:
        launcher = FleetLauncher(remote_launcher(settings, the_fleet, events))
    handlers = Handlers(store=events, config=cfg, host=settings.host, fleet=the_fleet, launcher=launcher)
    audit = Audit(store=events, host=settings.host, experiments=the_fleet.experiments if the_fleet else ())
    authorize = Authorize(config=cfg, audit=audit)
    app = build_app(client=client, signing_secret=secret, handlers=handlers, authorize=authorize)
    endpoint: Endpoint
    if app_token:
        endpoint = SocketModeEndpoint(app, app_token)
    else:
        require("bot", "waitress")  # HTTP mode only: the WSGI server in front of bolt
        from trainwarden.bot.http_server import SlackHTTPServer

        endpoint = SlackHTTPServer.listen(app, host=cfg.http_host, port=cfg.http_port)
    return SlackBot(notifier=notifier(settings, sink, channel=cfg.channel or ""), endpoint=endpoint,
                    holders=(handlers, authorize))  # fmt: skip

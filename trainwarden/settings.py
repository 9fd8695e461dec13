"""Settings: secrets and connection URLs from the environment, the rest from one YAML file.

Errors name the file and line and say what was expected.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainwarden.agent import config as agent_config
from trainwarden.agent.errors import ControlMessageError
from trainwarden.agent.watch import RunWatch
from trainwarden.bot.config import BotConfig
from trainwarden.core.errors import ConfigError, YamlFileError
from trainwarden.core.limits import MAX_HOST_CHARS
from trainwarden.core.yamlfile import Context, Reader, Schema, compose, document_schema, empty_mapping
from trainwarden.events.feed import RECLAIM_IDLE_S
from trainwarden.events.heartbeat import INTERVAL_S as HEARTBEAT_INTERVAL_S
from trainwarden.events.keys import NAMESPACE
from trainwarden.mcp_server.config import McpConfig, read_mcp
from trainwarden.slack_settings import read_slack
from trainwarden.workers import config as workers_config

REDIS_URL = "redis://127.0.0.1:6379/0"
DATA_DIR_ENV = "TRAINWARDEN_DATA_DIR"  # the default data directory, before the XDG one (the Docker image sets it)
DATA_DIR_NAME = "trainwarden"  # under $XDG_DATA_HOME, else ~/.local/share
# In the data directory unless the settings file sets them (relative to that file):
EVIDENCE_DIR = "evidence"
ARCHIVE_DIR = "archive"
FINDINGS_FILE = "findings.md"
LOGS_DIR = "logs"  # `trainwarden up`: one log per daemon
REDIS_DIR = "redis"  # `trainwarden up --redis`: the redis-server's AOF and log

PATHS = (("servers_file", "servers_file"), ("experiments_dir", "experiments_dir"), ("evidence_dir", "evidence_dir"),
         ("archive_dir", "archive_dir"), ("policy", "policy_path"), ("findings_file", "findings_file"),
         ("data_dir", "data_dir"))  # fmt: skip
# every duration setting reads through Reader.seconds: `90`, `90s`, `1m`, `1h30m`, `500ms` alike
AGENT_DURATIONS = ("poll_interval_s", "gpu_interval_s", "process_interval_s", "heartbeat_interval_s", "wandb_stale_s",
                   "wandb_api_interval_s", "unreadable_after_s", "first_step_budget_s", "lease_s",
                   "rotate_wait_s")  # fmt: skip
WATCH_PATHS = ("log", "exit_file", "metrics", "workdir", "wandb_dir", "wandb_run_dir")
WATCH_STRINGS = ("run", "session", "tmux_socket", "wandb_path", "match")
WORKER_DURATIONS = (
    "reclaim_idle_s",
    "lock_timeout_s",
    "evidence_timeout_s",
    "tick_startup_s",
    "tick_steady_s",
    "tick_max_silence_s",
    "check_interval_s",
)
WORKER_INTEGERS = ("runs_per_job",)
GPU_LIST = {"type": "array", "items": {"type": "integer", "minimum": 0}}


def default_data_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where what the daemons write goes when no setting says otherwise: $TRAINWARDEN_DATA_DIR, else
    $XDG_DATA_HOME/trainwarden, else ~/.local/share/trainwarden (a relative XDG_DATA_HOME is ignored, as
    the XDG base directory spec says). Never the working directory: a daemon's cwd is an accident."""
    env = os.environ if env is None else env
    if env.get(DATA_DIR_ENV):
        return Path(env[DATA_DIR_ENV]).expanduser().resolve()
    xdg = env.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path(env.get("HOME") or Path.home()) / ".local" / "share"
    return base / DATA_DIR_NAME


def data_paths(data_dir: Path) -> dict[str, Any]:
    """The settings whose defaults lie in the data directory, by field name (all Paths): their one definition."""
    return {
        "data_dir": data_dir,
        "evidence_dir": data_dir / EVIDENCE_DIR,
        "archive_dir": data_dir / ARCHIVE_DIR,
        "findings_file": data_dir / FINDINGS_FILE,
        "agent_state_file": data_dir / agent_config.STATE_FILE,  # the agent's spool goes beside it
    }


def _in_data_dir(name: str) -> Callable[[], Path]:
    return lambda: data_paths(default_data_dir())[name]


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    redis_url: str = REDIS_URL
    rq_redis_url: str | None = None  # RQ's queues may live on another Redis; default: redis_url
    host: str = field(default_factory=socket.gethostname)
    namespace: str = NAMESPACE
    queue: str = workers_config.QUEUE_NAME
    data_dir: Path = field(default_factory=default_data_dir)
    evidence_dir: Path = field(default_factory=_in_data_dir("evidence_dir"))
    archive_dir: Path = field(default_factory=_in_data_dir("archive_dir"))  # `archive` writes <dir>/<run>/*.jsonl.gz
    agent_state_file: Path = field(default_factory=_in_data_dir("agent_state_file"))
    agent_poll_interval_s: float = agent_config.POLL_INTERVAL_S
    agent_gpu_interval_s: float = agent_config.GPU_INTERVAL_S
    agent_process_interval_s: float = agent_config.PROCESS_INTERVAL_S
    agent_heartbeat_interval_s: float = agent_config.HEARTBEAT_INTERVAL_S
    agent_wandb_stale_s: float = agent_config.WANDB_STALE_S
    agent_wandb_api_interval_s: float = agent_config.WANDB_API_INTERVAL_S
    agent_wandb_base_url: str = agent_config.WANDB_BASE_URL
    agent_spool_dir: Path | None = None  # default: `spool/` beside the state file
    agent_spool_max_mb: float = agent_config.SPOOL_MAX_MB
    agent_nvml: bool = True
    agent_lease_s: float = (
        agent_config.LEASE_S
    )  # one agent per host: a standby takes over after this (events/agent_lease.py)
    agent_unreadable_after_s: float = agent_config.UNREADABLE_AFTER_S  # a log growing without metrics: unreadable
    agent_unreadable_after_lines: int = agent_config.UNREADABLE_AFTER_LINES
    agent_first_step_budget_s: float = agent_config.FIRST_STEP_BUDGET_S  # start-up lines only: said after this
    agent_rotate_wait_s: float = agent_config.ROTATE_WAIT_S  # a renamed log stays open this long once quiet
    watches: tuple[RunWatch, ...] = ()
    reclaim_idle_s: float = RECLAIM_IDLE_S
    lock_timeout_s: float = workers_config.LOCK_TIMEOUT_S
    evidence_timeout_s: float = workers_config.EVIDENCE_TIMEOUT_S
    job_timeout_s: int = workers_config.JOB_TIMEOUT_S
    runs_per_job: int = workers_config.RUNS_PER_JOB
    breaker: workers_config.BreakerSettings = field(default_factory=workers_config.BreakerSettings)
    slack: BotConfig = field(default_factory=BotConfig)
    mcp: McpConfig = field(default_factory=McpConfig)  # `trainwarden mcp`: what an agent may do
    servers_file: Path | None = None  # servers.yaml: remote runs over SSH
    experiments_dir: Path | None = None  # holds experiments/exp-*.yaml
    policy_path: Path | None = None  # None: the default policy shipped with trainwarden
    findings_file: Path = field(default_factory=_in_data_dir("findings_file"))
    tick_startup_s: float = workers_config.TICK_STARTUP_S
    tick_steady_s: float = workers_config.TICK_STEADY_S
    tick_max_silence_s: float = workers_config.TICK_MAX_SILENCE_S
    check_interval_s: float = workers_config.CHECK_INTERVAL_S  # `Next check` of a training-check report
    heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S  # every daemon's heartbeat hash (events/heartbeat.py)
    source: str = "defaults"


def parse_settings(text: str, path: Path, env: Mapping[str, str]) -> Settings:
    """Validate the whole file; ConfigError lists every problem as file:line:column: message."""
    try:
        root = compose(text, str(path))
    except YamlFileError as exc:
        raise ConfigError(str(exc)) from None
    ctx = Context(source=str(path))
    values = read_settings(Reader(root if root is not None else empty_mapping(), ctx, "the settings file"), path.parent)
    ctx.check(ConfigError)
    in_data_dir = data_paths(values.get("data_dir") or default_data_dir(env))
    project = project_dir(values.get("servers_file"), values.get("experiments_dir"))
    if project is not None and os.access(project, os.W_OK):
        # the procedure's findings.md: in the project root, beside status.yaml; a read-only project (Docker's
        # /config) keeps the data directory's, so that no STOP note is lost to a failed write
        in_data_dir["findings_file"] = project / FINDINGS_FILE
    return _with_env(Settings(source=str(path), **{**in_data_dir, **values}), env)


def project_dir(servers_file: Path | None, experiments_dir: Path | None) -> Path | None:
    """The project root of the procedure (it holds experiments/, status.yaml, findings.md): the parent of
    the experiments directory, which defaults to experiments/ beside servers.yaml. None without servers."""
    if servers_file is None:
        return None
    return (experiments_dir or servers_file.parent / "experiments").parent


def read_settings(top: Reader, base: Path) -> dict[str, Any]:
    """Settings fields from the file's top mapping (only those it sets); paths are relative to `base`."""
    values: dict[str, Any] = {}
    for key in ("redis_url", "rq_redis_url", "host", "namespace", "queue"):
        values[key] = top.string(key)
    values["heartbeat_interval_s"] = top.seconds("heartbeat_interval_s", positive=True)
    for key, attr in PATHS:
        text = top.string(key)
        values[attr] = (base / Path(text).expanduser()).resolve() if text is not None else None
    values.update(_agent(top.section("agent", "agent"), base))
    w = top.section("workers", "workers")
    for key in WORKER_DURATIONS:
        values[key] = w.seconds(key, positive=True)
    job_timeout_s = w.seconds("job_timeout_s", minimum=1, whole=True)  # RQ takes whole seconds
    values["job_timeout_s"] = int(job_timeout_s) if job_timeout_s is not None else None
    for key in WORKER_INTEGERS:
        values[key] = w.integer(key, minimum=1)
    values["breaker"] = _breaker(w.section("breaker", "workers.breaker"))
    w.finish()
    values["slack"] = read_slack(top.section("slack", "slack"))
    values["mcp"] = read_mcp(top.section("mcp", "mcp"))
    top.finish()
    return {k: v for k, v in values.items() if v is not None}


def _breaker(b: Reader) -> workers_config.BreakerSettings:
    """The stop breaker (workers/breaker.py): `max_stops: 0` turns it off."""
    defaults = workers_config.BreakerSettings()
    max_stops = b.integer("max_stops", minimum=0)
    window_s = b.seconds("window_s", positive=True)
    max_share = b.number("max_share", minimum=0, maximum=1)  # of the running runs; 0: off
    grace_s = b.seconds("new_rule_grace_s", minimum=0)
    b.finish()
    return workers_config.BreakerSettings(
        max_stops=defaults.max_stops if max_stops is None else max_stops,
        window_s=defaults.window_s if window_s is None else window_s,
        max_share=defaults.max_share if max_share is None else max_share,
        new_rule_grace_s=defaults.new_rule_grace_s if grace_s is None else grace_s,
    )


def _agent(a: Reader, base: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("state_file", "spool_dir"):
        text = a.string(key)
        out[f"agent_{key}"] = Path(text).expanduser() if text is not None else None
    for key in AGENT_DURATIONS:
        out[f"agent_{key}"] = a.seconds(key, positive=True)
    out["agent_spool_max_mb"] = a.number("spool_max_mb", positive=True)
    out["agent_wandb_base_url"] = a.string("wandb_base_url")
    out["agent_nvml"] = a.boolean("nvml")
    out["agent_unreadable_after_lines"] = a.integer("unreadable_after_lines", minimum=1)
    watches = [_watch(item, base) for item in a.items("watch", "an agent.watch entry")]
    if a.has("watch"):
        out["watches"] = tuple(w for w in watches if w is not None)
    a.finish()
    return out


def _watch(w: Reader, base: Path) -> RunWatch | None:
    complete = w.needs(("run", "log"), "an agent.watch entry needs both 'run' and 'log'")
    values: dict[str, Any] = {}
    for key in WATCH_STRINGS:
        values[key] = w.string(key)
    for key in WATCH_PATHS:
        text = w.string(key)
        values[key] = base / text if text is not None else None
    values["wandb"] = w.boolean("wandb")
    values["allow_offline_wandb"] = w.boolean("allow_offline_wandb")
    values["pid"] = w.integer("pid")
    values["stop_command"] = [arg for _, arg in w.string_list("stop_command", expected="a list (an argv)")] or None
    values["stop_grace_s"] = w.seconds("stop_grace_s", positive=True)
    got = w.raw("gpus", GPU_LIST)
    if got is not None:
        node, gpus = got
        if isinstance(gpus, list) and all(type(g) is int and g >= 0 for g in gpus):
            values["gpus"] = gpus
        else:
            w.ctx.problem(node, f"gpus must be a list of GPU indexes like [0, 1], got {gpus!r}")
    w.finish()
    if not complete or w.ctx.probe:
        return None
    try:
        return RunWatch.from_dict({k: v for k, v in values.items() if v is not None})
    except ControlMessageError as exc:
        w.fail("run", str(exc))
        return None


def settings_schema() -> Schema:
    """The settings file's JSON Schema, recorded by running its parser on an empty document."""
    top = Reader(None, Context(source="schema", probe=True), "the settings file")
    read_settings(top, Path("."))
    return document_schema("trainwarden settings", top, "Settings file (TRAINWARDEN_CONFIG or --config).")


def _with_env(settings: Settings, env: Mapping[str, str]) -> Settings:
    """Connection URLs may come from the environment (where deployments put them); env wins."""
    overrides: dict[str, Any] = {}
    if env.get("REDIS_URL"):
        overrides["redis_url"] = env["REDIS_URL"]
    if env.get("RQ_REDIS_URL"):
        overrides["rq_redis_url"] = env["RQ_REDIS_URL"]
    if env.get("TRAINWARDEN_HOST"):
        overrides["host"] = env["TRAINWARDEN_HOST"]
    settings = dataclasses.replace(settings, **overrides) if overrides else settings
    if len(settings.host) > MAX_HOST_CHARS:  # it names the host in every event
        where = "TRAINWARDEN_HOST" if "host" in overrides else f"host in {settings.source}"
        raise ConfigError(f"{where} is {len(settings.host)} characters long; a host name has at most {MAX_HOST_CHARS}")
    return settings


def load_settings(path: Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    if path is None and env.get("TRAINWARDEN_CONFIG"):
        path = Path(env["TRAINWARDEN_CONFIG"])
    if path is None:
        return _with_env(Settings(**data_paths(default_data_dir(env))), env)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(
            f"cannot read settings file {path}: {exc.strerror}; pass a readable one with --config FILE "
            "(or TRAINWARDEN_CONFIG)"
        ) from exc
    return parse_settings(text, path, env)

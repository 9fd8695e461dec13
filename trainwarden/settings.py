"""Settings: secrets and connection URLs from the environment, the rest from one YAML file.

Errors name the file and line and say what was expected.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainwarden import defaults
from trainwarden.agent.errors import ControlMessageError
from trainwarden.agent.watch import RunWatch
from trainwarden.bot.config import BotConfig
from trainwarden.errors import ConfigError
from trainwarden.slack_settings import parse_slack
from trainwarden.yaml_nodes import mapping as _mapping
from trainwarden.yaml_nodes import scalar as _scalar
from trainwarden.yaml_nodes import where as _where

TOP_LEVEL = {
    "redis_url",
    "rq_redis_url",
    "host",
    "namespace",
    "queue",
    "evidence_dir",
    "archive_dir",
    "agent",
    "workers",
    "servers_file",
    "experiments_dir",
    "policy",
    "findings_file",
    "slack",
}
AGENT_KEYS = {
    "state_file", "poll_interval_s", "gpu_interval_s", "process_interval_s", "heartbeat_interval_s", "wandb_stale_s",
    "wandb_api_interval_s", "wandb_base_url", "spool_dir", "spool_max_mb", "nvml", "watch",
}  # fmt: skip
AGENT_FLOATS = ("poll_interval_s", "gpu_interval_s", "process_interval_s", "heartbeat_interval_s", "wandb_stale_s",
                "wandb_api_interval_s", "spool_max_mb")  # fmt: skip
WATCH_KEYS = {
    "run", "log", "exit_file", "session", "tmux_socket", "pid", "workdir", "wandb", "wandb_dir", "wandb_run_dir",
    "wandb_path", "gpus",
}  # fmt: skip
WATCH_PATHS = ("log", "exit_file", "workdir", "wandb_dir", "wandb_run_dir")
WORKER_KEYS = {"reclaim_idle_s", "lock_timeout_s", "job_timeout_s", "runs_per_job", "tick_startup_s", "tick_steady_s",
               "tick_max_silence_s"}  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    redis_url: str = defaults.REDIS_URL
    rq_redis_url: str | None = None  # RQ's queues may live on another Redis; default: redis_url
    host: str = field(default_factory=socket.gethostname)
    namespace: str = defaults.NAMESPACE
    queue: str = defaults.QUEUE_NAME
    evidence_dir: Path = Path(defaults.EVIDENCE_DIR)
    archive_dir: Path = Path(defaults.ARCHIVE_DIR)  # `trainwarden archive` writes <archive_dir>/<run>/*.jsonl.gz
    agent_state_file: Path = field(default_factory=lambda: Path(defaults.AGENT_STATE_FILE).expanduser())
    agent_poll_interval_s: float = defaults.AGENT_POLL_INTERVAL_S
    agent_gpu_interval_s: float = defaults.AGENT_GPU_INTERVAL_S
    agent_process_interval_s: float = defaults.AGENT_PROCESS_INTERVAL_S
    agent_heartbeat_interval_s: float = defaults.AGENT_HEARTBEAT_INTERVAL_S
    agent_wandb_stale_s: float = defaults.AGENT_WANDB_STALE_S
    agent_wandb_api_interval_s: float = defaults.AGENT_WANDB_API_INTERVAL_S
    agent_wandb_base_url: str = defaults.AGENT_WANDB_BASE_URL
    agent_spool_dir: Path | None = None  # default: `spool/` beside the state file
    agent_spool_max_mb: float = defaults.AGENT_SPOOL_MAX_MB
    agent_nvml: bool = True
    watches: tuple[RunWatch, ...] = ()
    reclaim_idle_s: float = defaults.RECLAIM_IDLE_S
    lock_timeout_s: float = defaults.LOCK_TIMEOUT_S
    job_timeout_s: int = defaults.JOB_TIMEOUT_S
    runs_per_job: int = defaults.RUNS_PER_JOB
    slack: BotConfig = field(default_factory=BotConfig)
    servers_file: Path | None = None  # servers.yaml: remote runs over SSH
    experiments_dir: Path | None = None  # holds experiments/exp-*.yaml
    policy_path: Path | None = None  # None: the default policy shipped with trainwarden
    findings_file: Path = Path(defaults.FINDINGS_FILE)
    tick_startup_s: float = defaults.TICK_STARTUP_S
    tick_steady_s: float = defaults.TICK_STEADY_S
    tick_max_silence_s: float = defaults.TICK_MAX_SILENCE_S
    source: str = "defaults"


def parse_settings(text: str, path: Path, env: Mapping[str, str]) -> Settings:
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    values: dict[str, Any] = {"source": str(path)}
    if root is not None:
        top = _mapping(path, root, TOP_LEVEL, "the settings file")
        for key in ("redis_url", "rq_redis_url", "host", "namespace", "queue"):
            if key in top:
                values[key] = _scalar(path, top[key], str, key)
        paths = (
            ("servers_file", "servers_file"),
            ("experiments_dir", "experiments_dir"),
            ("evidence_dir", "evidence_dir"),
            ("archive_dir", "archive_dir"),
            ("policy", "policy_path"),
            ("findings_file", "findings_file"),
        )
        for key, attr in paths:
            if key in top:
                values[attr] = (path.parent / Path(_scalar(path, top[key], str, key)).expanduser()).resolve()
        if "agent" in top:
            values.update(_agent(path, top["agent"]))
        if "workers" in top:
            w = _mapping(path, top["workers"], WORKER_KEYS, "workers")
            for key, kind in (
                ("reclaim_idle_s", float),
                ("lock_timeout_s", float),
                ("job_timeout_s", int),
                ("runs_per_job", int),
                ("tick_startup_s", float),
                ("tick_steady_s", float),
                ("tick_max_silence_s", float),
            ):
                if key in w:
                    values[key] = _scalar(path, w[key], kind, f"workers.{key}")
        if "slack" in top:
            values["slack"] = parse_slack(path, top["slack"])
    return _with_env(Settings(**values), env)


def _bool(path: Path, node: yaml.Node, what: str) -> bool:
    value = yaml.safe_load(yaml.serialize(node))
    if not isinstance(value, bool):
        raise ConfigError(f"{_where(path, node)}: {what} must be true or false, got {value!r}")
    return value


def _agent(path: Path, node: yaml.Node) -> dict[str, Any]:
    a = _mapping(path, node, AGENT_KEYS, "agent")
    out: dict[str, Any] = {}
    if "state_file" in a:
        out["agent_state_file"] = Path(_scalar(path, a["state_file"], str, "agent.state_file")).expanduser()
    if "spool_dir" in a:
        out["agent_spool_dir"] = Path(_scalar(path, a["spool_dir"], str, "agent.spool_dir")).expanduser()
    for key in AGENT_FLOATS:
        if key in a:
            out[f"agent_{key}"] = _scalar(path, a[key], float, f"agent.{key}")
    if "wandb_base_url" in a:
        out["agent_wandb_base_url"] = _scalar(path, a["wandb_base_url"], str, "agent.wandb_base_url")
    if "nvml" in a:
        out["agent_nvml"] = _bool(path, a["nvml"], "agent.nvml")
    if "watch" in a:
        if not isinstance(a["watch"], yaml.SequenceNode):
            raise ConfigError(f"{_where(path, a['watch'])}: agent.watch must be a list of {{run, log, ...}} entries")
        out["watches"] = tuple(_watch(path, item) for item in a["watch"].value)
    return out


def _watch(path: Path, item: yaml.Node) -> RunWatch:
    w = _mapping(path, item, WATCH_KEYS, "an agent.watch entry")
    if "run" not in w or "log" not in w:
        raise ConfigError(f"{_where(path, item)}: an agent.watch entry needs both 'run' and 'log'")
    values: dict[str, Any] = {}
    for key, node in w.items():
        if key in WATCH_PATHS:
            values[key] = path.parent / _scalar(path, node, str, key)
        elif key == "wandb":
            values[key] = _bool(path, node, "wandb")
        elif key == "pid":
            values[key] = _scalar(path, node, int, "pid")
        elif key == "gpus":
            gpus = yaml.safe_load(yaml.serialize(node))
            if not isinstance(gpus, list) or not all(type(g) is int and g >= 0 for g in gpus):
                raise ConfigError(f"{_where(path, node)}: gpus must be a list of GPU indexes like [0, 1], got {gpus!r}")
            values[key] = gpus
        else:
            values[key] = _scalar(path, node, str, key)
    try:
        return RunWatch.from_dict(values)
    except ControlMessageError as exc:
        raise ConfigError(f"{_where(path, w['run'])}: {exc}") from None


def _with_env(settings: Settings, env: Mapping[str, str]) -> Settings:
    """Connection URLs may come from the environment (where deployments put them); env wins."""
    overrides: dict[str, Any] = {}
    if env.get("REDIS_URL"):
        overrides["redis_url"] = env["REDIS_URL"]
    if env.get("RQ_REDIS_URL"):
        overrides["rq_redis_url"] = env["RQ_REDIS_URL"]
    if env.get("TRAINWARDEN_HOST"):
        overrides["host"] = env["TRAINWARDEN_HOST"]
    return dataclasses.replace(settings, **overrides) if overrides else settings


def load_settings(path: Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    if path is None and env.get("TRAINWARDEN_CONFIG"):
        path = Path(env["TRAINWARDEN_CONFIG"])
    if path is None:
        return _with_env(Settings(), env)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(
            f"cannot read settings file {path}: {exc.strerror}; pass a readable one with --config FILE "
            "(or TRAINWARDEN_CONFIG)"
        ) from exc
    return parse_settings(text, path, env)

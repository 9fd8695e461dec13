"""Servers and experiments: validated config for remote runs (servers.yaml, experiments/exp-*.yaml).

Everything that later becomes part of a remote command is validated here, so launch code only
ever quotes values that are already known to be well-formed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from trainwarden.events.envelope import RUN_NAME_RE
from trainwarden.events.errors import YamlFileError
from trainwarden.events.yamlfile import Doc

HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$")
USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PARAM_RE = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")

SERVER_KEYS = {"name", "host", "port", "user", "key_file", "known_hosts", "gpus", "work_dir", "conda_env", "venv",
               "scratch", "min_free_gb", "connect_timeout_s", "tmux_socket"}  # fmt: skip
EXPERIMENT_KEYS = {"name", "server", "gpus", "command", "script", "code_dir", "env", "wandb", "total_steps", "epochs",
                   "baseline", "stop_command", "resume_command", "checkpoints", "depends_on", "allow_offline_wandb",
                   "max_restarts", "params", "stop_grace_s"}  # fmt: skip
WANDB_KEYS = {"project", "group", "run_name", "entity"}
BASELINE_KEYS = {"metric", "value", "direction"}
CHECKPOINT_KEYS = {"dir", "pattern", "best_metric", "mode", "milestones"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Server:
    name: str
    host: str
    user: str
    work_dir: str
    port: int = 22
    key_file: Path | None = None
    known_hosts: Path | None = None  # None: ~/.ssh/known_hosts
    gpus: tuple[int, ...] = ()
    conda_env: str | None = None
    venv: str | None = None
    scratch: tuple[str, ...] = ()
    min_free_gb: float = 10.0
    connect_timeout_s: float = 10.0
    tmux_socket: str | None = None  # tmux -L name; None: the user's default tmux server


@dataclass(frozen=True, slots=True, kw_only=True)
class WandbConfig:
    project: str | None = None
    group: str | None = None
    run_name: str | None = None
    entity: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointConfig:
    dir: str
    pattern: str = "*.pt"
    best_metric: str | None = None
    mode: str = "min"
    milestones: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Experiment:
    name: str
    server: str
    command: tuple[str, ...]
    gpus: int = 1  # how many GPUs; the scheduler picks free ones unless gpu_ids pins them
    gpu_ids: tuple[int, ...] | None = None
    code_dir: str | None = None  # default: the server's work_dir
    env: Mapping[str, str] = field(default_factory=dict)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    total_steps: int | None = None
    epochs: int | None = None
    baseline: Mapping[str, Any] | None = None
    stop_command: tuple[str, ...] | None = None
    resume_command: tuple[str, ...] | None = None
    checkpoints: CheckpointConfig | None = None
    depends_on: tuple[str, ...] = ()
    allow_offline_wandb: bool = False
    max_restarts: int = 0
    params: Mapping[str, str] = field(default_factory=dict)
    stop_grace_s: float = 30.0
    source: str = ""


@dataclass(frozen=True, slots=True)
class Fleet:
    servers: Mapping[str, Server]
    experiments: Mapping[str, Experiment]

    def server_of(self, experiment: Experiment) -> Server:
        return self.servers[experiment.server]


def _name(doc: Doc, node: yaml.Node, what: str) -> str:
    value = doc.string(node, what)
    if not RUN_NAME_RE.match(value):
        raise doc.error(node, f"{what} {value!r} must be 1-100 letters, digits, '_', '.', '-' (no spaces or shell)")
    return value


def _command(doc: Doc, node: yaml.Node, what: str) -> tuple[str, ...]:
    """A command as a list, or a string split like a shell would (but never run through one)."""
    value = doc.value(node)
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise doc.error(node, f"{what} cannot be split into arguments: {exc}") from None
    elif isinstance(value, list) and all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
        argv = [str(v) for v in value]
    else:
        raise doc.error(node, f"{what} must be a string or a list of strings")
    if not argv:
        raise doc.error(node, f"{what} is empty")
    if any("\x00" in a or "\n" in a for a in argv):
        raise doc.error(node, f"{what} must not contain NUL or newline characters")
    return tuple(argv)


def _path(doc: Doc, node: yaml.Node, what: str) -> str:
    value = doc.string(node, what)
    if any(c in value for c in "\x00\n"):
        raise doc.error(node, f"{what} must not contain NUL or newline characters")
    return value


def _gpu_ids(doc: Doc, node: yaml.Node, what: str) -> tuple[int, ...]:
    ids = tuple(doc.number(n, f"each entry of {what}", kind=int, minimum=0) for n in doc.sequence(node, what))
    if len(set(ids)) != len(ids):
        raise doc.error(node, f"{what} lists a GPU twice")
    return ids


def parse_servers(doc: Doc) -> dict[str, Server]:
    top = doc.mapping(doc.root, "the servers file", allowed={"servers"}, required={"servers"})
    servers: dict[str, Server] = {}
    for item in doc.sequence(top["servers"], "servers"):
        m = doc.mapping(item, "a server", allowed=SERVER_KEYS, required={"name", "host", "user", "work_dir"})
        name = _name(doc, m["name"], "server name")
        if name in servers:
            raise doc.error(m["name"], f"server {name!r} is defined twice")
        host = doc.string(m["host"], "host")
        if not HOST_RE.match(host):
            raise doc.error(m["host"], f"host {host!r} is not a host name or IP address")
        user = doc.string(m["user"], "user")
        if not USER_RE.match(user):
            raise doc.error(m["user"], f"user {user!r} is not a valid user name")
        if "conda_env" in m and "venv" in m:
            raise doc.error(item, "a server has either conda_env or venv, not both")
        base = doc.path.parent
        servers[name] = Server(
            name=name,
            host=host,
            user=user,
            work_dir=_path(doc, m["work_dir"], "work_dir"),
            port=doc.number(m["port"], "port", kind=int, minimum=1) if "port" in m else 22,
            key_file=(base / doc.string(m["key_file"], "key_file")).expanduser() if "key_file" in m else None,
            known_hosts=(base / doc.string(m["known_hosts"], "known_hosts")).expanduser()
            if "known_hosts" in m
            else None,
            gpus=_gpu_ids(doc, m["gpus"], "gpus") if "gpus" in m else (),
            conda_env=_name(doc, m["conda_env"], "conda_env") if "conda_env" in m else None,
            venv=_path(doc, m["venv"], "venv") if "venv" in m else None,
            scratch=tuple(_path(doc, n, "scratch") for n in doc.sequence(m["scratch"], "scratch"))
            if "scratch" in m
            else (),
            min_free_gb=doc.number(m["min_free_gb"], "min_free_gb", minimum=0) if "min_free_gb" in m else 10.0,
            connect_timeout_s=doc.number(m["connect_timeout_s"], "connect_timeout_s", minimum=0.1)
            if "connect_timeout_s" in m
            else 10.0,
            tmux_socket=_name(doc, m["tmux_socket"], "tmux_socket") if "tmux_socket" in m else None,
        )
    return servers


def parse_experiment(doc: Doc) -> tuple[Experiment, dict[str, yaml.Node]]:
    m = doc.mapping(doc.root, "an experiment", allowed=EXPERIMENT_KEYS, required={"name", "server"})
    if ("command" in m) == ("script" in m):
        raise doc.error(doc.root, "an experiment needs exactly one of 'command' or 'script'")
    command = _command(doc, m["command"], "command") if "command" in m else ("bash", _path(doc, m["script"], "script"))
    env = doc.string_map(m["env"], "env") if "env" in m else {}
    for key_node, _ in m["env"].value if "env" in m else ():
        if not ENV_NAME_RE.match(str(key_node.value)):
            raise doc.error(key_node, f"env name {key_node.value!r} is not a valid environment variable name")
    gpus_value = doc.value(m["gpus"]) if "gpus" in m else 1
    gpu_ids = _gpu_ids(doc, m["gpus"], "gpus") if isinstance(gpus_value, list) else None
    gpus = (
        len(gpu_ids)
        if gpu_ids is not None
        else doc.number(m["gpus"], "gpus", kind=int, minimum=0)
        if "gpus" in m
        else 1
    )
    params = doc.string_map(m["params"], "params") if "params" in m else {}
    for key, value in params.items():
        if not PARAM_RE.match(key) or not PARAM_RE.match(value):
            raise doc.error(m["params"], f"params {key}={value!r}: use short names and values ([A-Za-z0-9_.-])")
    experiment = Experiment(
        name=_name(doc, m["name"], "experiment name"),
        server=_name(doc, m["server"], "server"),
        command=command,
        gpus=gpus,
        gpu_ids=gpu_ids,
        code_dir=_path(doc, m["code_dir"], "code_dir") if "code_dir" in m else None,
        env=env,
        wandb=_wandb(doc, m["wandb"]) if "wandb" in m else WandbConfig(),
        total_steps=doc.number(m["total_steps"], "total_steps", kind=int, minimum=1) if "total_steps" in m else None,
        epochs=doc.number(m["epochs"], "epochs", kind=int, minimum=1) if "epochs" in m else None,
        baseline=_baseline(doc, m["baseline"]) if "baseline" in m else None,
        stop_command=_command(doc, m["stop_command"], "stop_command") if "stop_command" in m else None,
        resume_command=_command(doc, m["resume_command"], "resume_command") if "resume_command" in m else None,
        checkpoints=_checkpoints(doc, m["checkpoints"]) if "checkpoints" in m else None,
        depends_on=tuple(_name(doc, n, "depends_on entry") for n in doc.sequence(m["depends_on"], "depends_on"))
        if "depends_on" in m
        else (),
        allow_offline_wandb=doc.boolean(m["allow_offline_wandb"], "allow_offline_wandb")
        if "allow_offline_wandb" in m
        else False,
        max_restarts=doc.number(m["max_restarts"], "max_restarts", kind=int, minimum=0) if "max_restarts" in m else 0,
        params=params,
        stop_grace_s=doc.number(m["stop_grace_s"], "stop_grace_s", minimum=0) if "stop_grace_s" in m else 30.0,
        source=str(doc.path),
    )
    return experiment, m


def _wandb(doc: Doc, node: yaml.Node) -> WandbConfig:
    m = doc.mapping(node, "wandb", allowed=WANDB_KEYS)
    values = {k: _name(doc, m[k], f"wandb.{k}") for k in m}
    return WandbConfig(**values)


def _baseline(doc: Doc, node: yaml.Node) -> dict[str, Any]:
    m = doc.mapping(node, "baseline", allowed=BASELINE_KEYS, required={"metric", "value"})
    direction = doc.string(m["direction"], "baseline.direction") if "direction" in m else "min"
    if direction not in ("min", "max"):
        raise doc.error(m["direction"], f"baseline.direction must be 'min' or 'max', got {direction!r}")
    return {"metric": doc.string(m["metric"], "baseline.metric"), "value": doc.number(m["value"], "baseline.value"),
            "direction": direction}  # fmt: skip


def _checkpoints(doc: Doc, node: yaml.Node) -> CheckpointConfig:
    m = doc.mapping(node, "checkpoints", allowed=CHECKPOINT_KEYS, required={"dir"})
    mode = doc.string(m["mode"], "checkpoints.mode") if "mode" in m else "min"
    if mode not in ("min", "max"):
        raise doc.error(m["mode"], f"checkpoints.mode must be 'min' or 'max', got {mode!r}")
    pattern = _path(doc, m["pattern"], "checkpoints.pattern") if "pattern" in m else "*.pt"
    if "/" in pattern:
        raise doc.error(m["pattern"], "checkpoints.pattern is a file name pattern like '*.pt', without '/'")
    return CheckpointConfig(
        dir=_path(doc, m["dir"], "checkpoints.dir"),
        pattern=pattern,
        best_metric=doc.string(m["best_metric"], "checkpoints.best_metric") if "best_metric" in m else None,
        mode=mode,
        milestones=tuple(doc.number(n, "milestone", kind=int, minimum=0)
                         for n in doc.sequence(m["milestones"], "checkpoints.milestones"))
        if "milestones" in m
        else (),
    )  # fmt: skip


def load_fleet(servers_file: Path, experiment_files: Collection[Path]) -> Fleet:
    """Load and cross-check everything; raises YamlFileError at the first problem, with file:line."""
    servers = parse_servers(Doc(servers_file))
    experiments: dict[str, Experiment] = {}
    nodes: dict[str, dict[str, yaml.Node]] = {}
    docs: dict[str, Doc] = {}
    for path in sorted(experiment_files):
        doc = Doc(path)
        experiment, m = parse_experiment(doc)
        if experiment.name in experiments:
            raise doc.error(m["name"], f"experiment {experiment.name!r} is also defined in "
                                       f"{experiments[experiment.name].source}")  # fmt: skip
        experiments[experiment.name], nodes[experiment.name], docs[experiment.name] = experiment, m, doc
    for name, e in experiments.items():
        doc, m = docs[name], nodes[name]
        if e.server not in servers:
            raise doc.error(m["server"], f"unknown server {e.server!r}; servers: {', '.join(sorted(servers))}")
        server = servers[e.server]
        if e.gpu_ids is not None and server.gpus and not set(e.gpu_ids) <= set(server.gpus):
            raise doc.error(
                m["gpus"], f"GPUs {list(e.gpu_ids)} are not all on {server.name} (it has {list(server.gpus)})"
            )
        if e.gpu_ids is None and server.gpus and e.gpus > len(server.gpus):
            raise doc.error(m["gpus"], f"{e.gpus} GPUs asked for, {server.name} has {len(server.gpus)}")
        for dep in e.depends_on:
            if dep not in experiments:
                raise doc.error(m["depends_on"], f"depends_on names unknown experiment {dep!r}")
    _check_acyclic(experiments, docs, nodes)
    return Fleet(servers=servers, experiments=experiments)


def _check_acyclic(experiments: Mapping[str, Experiment], docs: Mapping[str, Doc], nodes: Mapping[str, Any]) -> None:
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = " -> ".join([*path[path.index(name) :], name])
            raise docs[name].error(nodes[name].get("depends_on"), f"depends_on makes a cycle: {cycle}")
        state[name] = 1
        for dep in experiments[name].depends_on:
            visit(dep, [*path, name])
        state[name] = 2

    for name in experiments:
        visit(name, [])


def experiment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("exp-*.yaml")) + sorted(directory.glob("exp-*.yml"))


__all__ = ["CheckpointConfig", "Experiment", "Fleet", "Server", "WandbConfig", "YamlFileError", "load_fleet"]

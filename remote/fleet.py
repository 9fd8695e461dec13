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
from trainwarden.core.errors import YamlFileError
from trainwarden.core.yamlfile import Context, Reader, Schema, compose, document_schema, empty_mapping, read_text
from trainwarden.events.envelope import RUN_NAME_RE

HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$")
USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PARAM_RE = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
SLACK_USER_RE = re.compile(r"^[UW][A-Z0-9]{2,}$")  # a Slack user id (experiments' owner, slack.routes' mention)

WANDB_KEYS = {"project", "group", "run_name", "entity"}


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


FAILED_RUNS = ("no_weights", "keep_best")


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointConfig:
    dir: str
    pattern: str = "*.pt"
    best_metric: str | None = None
    mode: str = "min"
    milestones: tuple[int, ...] = ()
    failed_runs: str = "no_weights"  # the procedure's table: a failed run keeps logs, metrics, config; or keep_best


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
    owner: str | None = None  # Slack user id named on the run's STOP (docs/slack.md "Who is named")
    source: str = ""


@dataclass(frozen=True, slots=True)
class Fleet:
    servers: Mapping[str, Server]
    experiments: Mapping[str, Experiment]

    def server_of(self, experiment: Experiment) -> Server:
        return self.servers[experiment.server]


NAME_HINT = "must be 1-100 letters, digits, '_', '.', '-' (no spaces or shell)"
ARGV_SCHEMA = {"anyOf": [{"type": "string", "minLength": 1}, {"type": "array", "minItems": 1,
                                                             "items": {"type": ["string", "number"]}}]}  # fmt: skip
GPU_INDEX = {"type": "integer", "minimum": 0}
GPUS_SCHEMA = {"anyOf": [GPU_INDEX, {"type": "array", "items": GPU_INDEX, "uniqueItems": True}]}


def _name(r: Reader, key: str, what: str, *, required: bool = False) -> str | None:
    return r.string(key, required=required, pattern=RUN_NAME_RE, label=what, hint=NAME_HINT)


def _path(r: Reader, key: str, *, required: bool = False) -> str | None:
    value = r.string(key, required=required)
    if value is not None and any(c in value for c in "\x00\n"):
        r.fail(key, f"{key} must not contain NUL or newline characters")
        return None
    return value


def _command(r: Reader, key: str) -> tuple[str, ...] | None:
    """A command as a list, or a string split like a shell would (but never run through one)."""
    got = r.raw(key, ARGV_SCHEMA)
    if got is None:
        return None
    node, value = got
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            r.ctx.problem(node, f"{key} cannot be split into arguments: {exc}")
            return None
    elif isinstance(value, list) and all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
        argv = [str(v) for v in value]
    else:
        r.ctx.problem(node, f"{key} must be a string or a list of strings")
        return None
    if not argv:
        r.ctx.problem(node, f"{key} is empty")
    elif any("\x00" in a or "\n" in a for a in argv):
        r.ctx.problem(node, f"{key} must not contain NUL or newline characters")
    else:
        return tuple(argv)
    return None


def read_servers(top: Reader, base: Path) -> tuple[dict[str, Server], dict[str, Reader]]:
    """The servers by name, with the Reader of each (for checks that point into it)."""
    servers: dict[str, Server] = {}
    readers: dict[str, Reader] = {}
    for r in top.items("servers", "a server", required=True):
        name = _name(r, "name", "server name", required=True)
        host = r.string("host", required=True, pattern=HOST_RE, label="host", hint="is not a host name or IP address")
        user = r.string("user", required=True, pattern=USER_RE, label="user", hint="is not a valid user name")
        work_dir = _path(r, "work_dir", required=True)
        key_file, known_hosts = r.string("key_file"), r.string("known_hosts")
        scratch = tuple(v for _, v in r.string_list("scratch"))
        options: dict[str, Any] = dict(  # absent: the Server's defaults
            port=r.integer("port", minimum=1, maximum=65535),
            key_file=(base / key_file).expanduser() if key_file else None,
            known_hosts=(base / known_hosts).expanduser() if known_hosts else None,
            gpus=r.integers("gpus"),
            conda_env=_name(r, "conda_env", "conda_env"),
            venv=_path(r, "venv"),
            scratch=scratch if r.has("scratch") else None,
            min_free_gb=r.number("min_free_gb", minimum=0),
            connect_timeout_s=r.seconds("connect_timeout_s", minimum=0.1),
            tmux_socket=_name(r, "tmux_socket", "tmux_socket"),
        )
        r.finish()
        if r.has("conda_env") and r.has("venv"):
            r.ctx.problem(r.node, "a server has either conda_env or venv, not both")
        if name is None or host is None or user is None or work_dir is None:
            continue
        if name in servers:
            r.fail("name", f"server {name!r} is defined twice")
            continue
        options = {k: v for k, v in options.items() if v is not None}
        servers[name] = Server(name=name, host=host, user=user, work_dir=work_dir, **options)
        readers[name] = r
    top.finish()
    return servers, readers


def read_experiment(r: Reader) -> Experiment | None:
    """One experiment file; None when it has a problem (recorded in r.ctx)."""
    name = _name(r, "name", "experiment name", required=True)
    server = _name(r, "server", "server", required=True)
    command, script = _command(r, "command"), _path(r, "script")
    if r.ok and r.present and r.has("command") == r.has("script"):
        r.ctx.problem(r.node, "an experiment needs exactly one of 'command' or 'script'")
    env = r.string_map("env")
    for key, (key_node, _) in env.items():
        if not ENV_NAME_RE.match(key):
            r.ctx.problem(key_node, f"env name {key!r} is not a valid environment variable name")
    gpus_got = r.raw("gpus", GPUS_SCHEMA)
    gpus, gpu_ids = _gpus(r, gpus_got)
    params = {k: v for k, (_, v) in r.string_map("params").items()}
    for key, value in params.items():
        if not PARAM_RE.match(key) or not PARAM_RE.match(value):
            r.fail("params", f"params {key}={value!r}: use short names and values ([A-Za-z0-9_.-])")
    w = r.section("wandb", "wandb")
    wandb = WandbConfig(**{k: _name(w, k, f"wandb.{k}") for k in sorted(WANDB_KEYS)})
    w.finish()
    depends_on = tuple(v for _, v in r.string_list("depends_on", pattern=RUN_NAME_RE, hint=NAME_HINT))
    experiment: dict[str, Any] = dict(
        code_dir=_path(r, "code_dir"),
        total_steps=r.integer("total_steps", minimum=1),
        epochs=r.integer("epochs", minimum=1),
        baseline=_baseline(r.section("baseline", "baseline")),
        stop_command=_command(r, "stop_command"),
        resume_command=_command(r, "resume_command"),
        checkpoints=_checkpoints(r.section("checkpoints", "checkpoints")),
        allow_offline_wandb=r.boolean("allow_offline_wandb"),
        max_restarts=r.integer("max_restarts", minimum=0),
        stop_grace_s=r.seconds("stop_grace_s", minimum=0),
        owner=r.string("owner", pattern=SLACK_USER_RE, label="owner", hint="is not a Slack user id like U0123ABCD"),
    )
    r.finish()
    argv = command if command is not None else ("bash", script) if script is not None else None
    if name is None or server is None or argv is None or r.ctx.probe:
        return None
    return Experiment(name=name, server=server, command=argv, gpus=gpus, gpu_ids=gpu_ids,
                      env={k: v for k, (_, v) in env.items()}, wandb=wandb, depends_on=depends_on, params=params,
                      source=r.ctx.source, **{k: v for k, v in experiment.items() if v is not None})  # fmt: skip


def _gpus(r: Reader, got: tuple[yaml.Node, Any] | None) -> tuple[int, tuple[int, ...] | None]:
    """How many GPUs, and which when the file pins them (`gpus: [0, 1]`)."""
    if got is None:
        return 1, None
    node, value = got
    if isinstance(value, list):
        if not all(type(v) is int and v >= 0 for v in value):
            r.ctx.problem(node, f"gpus must be a count or a list of GPU indexes like [0, 1], got {value!r}")
            return 1, None
        if len(set(value)) != len(value):
            r.ctx.problem(node, "gpus lists a GPU twice")
        return len(value), tuple(value)
    if type(value) is not int or value < 0:
        r.ctx.problem(node, f"gpus must be a count or a list of GPU indexes like [0, 1], got {value!r}")
        return 1, None
    return value, None


def _baseline(b: Reader) -> dict[str, Any] | None:
    metric, value = b.string("metric", required=True), b.number("value", required=True)
    direction = b.choice("direction", ("min", "max"), default="min", label="baseline.direction")
    b.finish()
    if not b.present or metric is None or value is None:
        return None
    return {"metric": metric, "value": value, "direction": direction}


def _checkpoints(c: Reader) -> CheckpointConfig | None:
    directory = _path(c, "dir", required=True)
    pattern = _path(c, "pattern") or "*.pt"
    if "/" in pattern:
        c.fail("pattern", "checkpoints.pattern is a file name pattern like '*.pt', without '/'")
    config = CheckpointConfig(
        dir=directory or "",
        pattern=pattern,
        best_metric=c.string("best_metric"),
        mode=c.choice("mode", ("min", "max"), default="min", label="checkpoints.mode"),
        milestones=c.integers("milestones", unique=False) or (),
        failed_runs=c.choice("failed_runs", FAILED_RUNS, default="no_weights", label="checkpoints.failed_runs"),
    )
    c.finish()
    return config if c.present and directory is not None else None


def load_fleet(servers_file: Path, experiment_files: Collection[Path]) -> Fleet:
    """Load and cross-check everything; raises YamlFileError listing every problem, with file:line:column."""
    problems: list[str] = []
    servers, _ = read_servers(_top(servers_file, problems, "the servers file"), servers_file.parent)
    experiments: dict[str, Experiment] = {}
    readers: dict[str, Reader] = {}
    for path in sorted(experiment_files):
        r = _top(path, problems, "an experiment")
        experiment = read_experiment(r)
        if experiment is None:
            continue
        if experiment.name in experiments:
            r.fail("name", f"experiment {experiment.name!r} is also defined in {experiments[experiment.name].source}")
            continue
        experiments[experiment.name], readers[experiment.name] = experiment, r
    for name, e in experiments.items():
        r = readers[name]
        server = servers.get(e.server)
        if server is None:
            r.fail("server", f"unknown server {e.server!r}; servers: {', '.join(sorted(servers))}")
        elif e.gpu_ids is not None and server.gpus and not set(e.gpu_ids) <= set(server.gpus):
            r.fail("gpus", f"GPUs {list(e.gpu_ids)} are not all on {server.name} (it has {list(server.gpus)})")
        elif e.gpu_ids is None and server.gpus and e.gpus > len(server.gpus):
            r.fail("gpus", f"{e.gpus} GPUs asked for, {server.name} has {len(server.gpus)}")
        for dep in e.depends_on:
            if dep not in experiments:
                r.fail("depends_on", f"depends_on names unknown experiment {dep!r}")
    if not problems:
        _check_acyclic(experiments, readers)
    Context(source=str(servers_file), problems=problems).check()
    return Fleet(servers=servers, experiments=experiments)


def _top(path: Path, problems: list[str], what: str) -> Reader:
    root = compose(read_text(path), str(path))
    return Reader(root if root is not None else empty_mapping(), Context(source=str(path), problems=problems), what)


def _check_acyclic(experiments: Mapping[str, Experiment], readers: Mapping[str, Reader]) -> None:
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> bool:
        if state.get(name) == 2:
            return True
        if state.get(name) == 1:
            cycle = " -> ".join([*path[path.index(name) :], name])
            readers[name].fail("depends_on", f"depends_on makes a cycle: {cycle}")
            return False
        state[name] = 1
        for dep in experiments[name].depends_on:
            if not visit(dep, [*path, name]):
                return False
        state[name] = 2
        return True

    for name in experiments:
        if not visit(name, []):
            return


def servers_schema() -> Schema:
    top = Reader(None, Context(source="schema", probe=True), "the servers file")
    read_servers(top, Path("."))
    return document_schema("trainwarden servers", top, "servers.yaml: the GPU servers remote runs go to.")


def experiment_schema() -> Schema:
    top = Reader(None, Context(source="schema", probe=True), "an experiment")
    read_experiment(top)
    return document_schema("trainwarden experiment", top, "experiments/exp-*.yaml: one experiment to launch.")


def experiment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("exp-*.yaml")) + sorted(directory.glob("exp-*.yml"))


__all__ = ["CheckpointConfig", "Experiment", "Fleet", "Server", "WandbConfig", "YamlFileError", "load_fleet"]

"""The `slack:` section of the settings file, validated like the rest (errors name file:line:column).

```yaml
slack:
  channel: C0123456789            # where notifications go
  allow:                          # per command: Slack user ids, optionally channel ids
    status: {users: [U01, U02]}
    launch: {users: [U01], channels: [C0123456789]}
    stop: {users: [U01]}
    snooze: {users: [U01, U02]}
  experiments: experiments.yaml   # or a list of {name, command, workdir, log, servers, total_steps}
  rate_per_s: 1                   # messages per second per channel
  flap_threshold: 3               # openings per flap_window_s before "flapping"
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.config import COMMANDS, Allow, BotConfig, Experiment
from events.envelope import RUN_NAME_RE
from trainwarden.errors import ConfigError
from trainwarden.yaml_nodes import mapping, scalar, where

SLACK_KEYS = {
    "channel", "allow", "experiments", "rate_per_s", "burst", "flap_threshold", "flap_window_s",
    "keep_running_snooze_s", "deadman_s", "http_host", "http_port",
}  # fmt: skip
NUMBERS: dict[str, type] = {
    "rate_per_s": float, "burst": int, "flap_threshold": int, "flap_window_s": float,
    "keep_running_snooze_s": float, "deadman_s": float, "http_port": int,
}  # fmt: skip
EXPERIMENT_KEYS = {"name", "command", "workdir", "log", "servers", "total_steps"}


def parse_slack(path: Path, node: yaml.Node) -> BotConfig:
    s = mapping(path, node, SLACK_KEYS, "slack")
    values: dict[str, Any] = {}
    for key in ("channel", "http_host"):
        if key in s:
            values[key] = scalar(path, s[key], str, f"slack.{key}")
    for key, kind in NUMBERS.items():
        if key in s:
            values[key] = scalar(path, s[key], kind, f"slack.{key}")
    if "allow" in s:
        values["allow"] = _allow(path, s["allow"])
    if "experiments" in s:
        values["experiments"] = _experiments(path, s["experiments"])
    return BotConfig(**values)


def _ids(path: Path, node: yaml.Node, what: str) -> frozenset[str]:
    if not isinstance(node, yaml.SequenceNode):
        raise ConfigError(f"{where(path, node)}: {what} must be a list of Slack ids like [U0123ABCD]")
    return frozenset(scalar(path, item, str, what) for item in node.value)


def _allow(path: Path, node: yaml.Node) -> dict[str, Allow]:
    out: dict[str, Allow] = {}
    for command, item in mapping(path, node, set(COMMANDS), "slack.allow").items():
        a = mapping(path, item, {"users", "channels"}, f"slack.allow.{command}")
        if "users" not in a:
            raise ConfigError(f"{where(path, item)}: slack.allow.{command} needs a 'users' list")
        channels = _ids(path, a["channels"], f"slack.allow.{command}.channels") if "channels" in a else None
        out[command] = Allow(users=_ids(path, a["users"], f"slack.allow.{command}.users"), channels=channels)
    return out


def _experiments(path: Path, node: yaml.Node) -> tuple[Experiment, ...]:
    if isinstance(node, yaml.ScalarNode):  # a path to a file holding the list
        file = path.parent / scalar(path, node, str, "slack.experiments")
        try:
            root = yaml.compose(file.read_text())
        except OSError as exc:
            raise ConfigError(f"{where(path, node)}: cannot read experiments file {file}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{file}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
        if root is None:
            return ()
        return _experiments(file, root)
    if not isinstance(node, yaml.SequenceNode):
        raise ConfigError(f"{where(path, node)}: slack.experiments must be a list or the path of a YAML file")
    experiments = [_experiment(path, item) for item in node.value]
    seen: set[str] = set()
    for item, exp in zip(node.value, experiments, strict=True):
        if exp.name in seen:
            raise ConfigError(f"{where(path, item)}: experiment {exp.name!r} is listed twice")
        seen.add(exp.name)
    return tuple(experiments)


def _experiment(path: Path, node: yaml.Node) -> Experiment:
    e = mapping(path, node, EXPERIMENT_KEYS, "an experiment")
    for key in ("name", "command", "workdir"):
        if key not in e:
            raise ConfigError(f"{where(path, node)}: an experiment needs 'name', 'command' and 'workdir'")
    name = scalar(path, e["name"], str, "experiment name")
    if not RUN_NAME_RE.match(name):
        raise ConfigError(f"{where(path, e['name'])}: experiment name {name!r} must be a valid run name "
                          "(letters, digits, '_', '.', '-')")  # fmt: skip
    command = e["command"]
    if not isinstance(command, yaml.SequenceNode) or not command.value:
        raise ConfigError(f"{where(path, command)}: command must be a non-empty argv list like [python, train.py]")
    return Experiment(
        name=name,
        command=tuple(scalar(path, part, str, "command item") for part in command.value),
        workdir=(path.parent / scalar(path, e["workdir"], str, "workdir")).resolve(),
        log=(path.parent / scalar(path, e["log"], str, "log")).resolve() if "log" in e else None,
        servers=tuple(sorted(_ids(path, e["servers"], "servers"))) if "servers" in e else (),
        total_steps=scalar(path, e["total_steps"], int, "total_steps") if "total_steps" in e else None,
    )

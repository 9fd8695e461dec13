"""The `slack:` section of the settings file, validated like the rest (errors name file:line:column).

```yaml
slack:
  channel: C0123456789            # where notifications go
  allow:                          # per command: Slack user ids, optionally channel ids
    status: {users: [U01, U02]}
    launch: {users: [U01], channels: [C0123456789]}
    stop: {users: [U01]}
    snooze: {users: [U01, U02]}
  rate_per_s: 1                   # messages per second per channel
  flap_threshold: 3               # openings per flap_window_s before "flapping"
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainwarden.bot.config import COMMANDS, Allow, BotConfig
from trainwarden.errors import ConfigError
from trainwarden.yaml_nodes import mapping, scalar, where

SLACK_KEYS = {
    "channel", "allow", "rate_per_s", "burst", "flap_threshold", "flap_window_s",
    "keep_running_snooze_s", "deadman_s", "http_host", "http_port",
}  # fmt: skip
NUMBERS: dict[str, type] = {
    "rate_per_s": float, "burst": int, "flap_threshold": int, "flap_window_s": float,
    "keep_running_snooze_s": float, "deadman_s": float, "http_port": int,
}  # fmt: skip


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

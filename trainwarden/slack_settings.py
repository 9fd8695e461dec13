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

from typing import Any

from trainwarden.bot.config import COMMANDS, Allow, BotConfig
from trainwarden.events.yamlfile import Reader

NUMBERS = ("rate_per_s", "flap_window_s", "keep_running_snooze_s", "deadman_s")
INTEGERS = ("burst", "flap_threshold", "http_port")


def read_slack(s: Reader) -> BotConfig | None:
    """The bot's config; None when the section is absent (the defaults apply)."""
    values: dict[str, Any] = {}
    for key in ("channel", "http_host"):
        values[key] = s.string(key)
    for key in NUMBERS:
        values[key] = s.number(key, positive=True)
    for key in INTEGERS:
        values[key] = s.integer(key, minimum=1)
    allow = s.section("allow", "slack.allow")
    allows: dict[str, Allow] = {}
    for command in COMMANDS:
        a = allow.section(command, f"slack.allow.{command}")
        complete = a.needs(("users",), f"slack.allow.{command} needs a 'users' list")
        users = a.string_list("users", expected="a list of Slack ids like [U0123ABCD]")
        channels = a.string_list("channels", expected="a list of Slack ids like [C0123ABCD]")
        a.finish()
        if a.present and complete:
            only = frozenset(v for _, v in channels) if a.has("channels") else None
            allows[command] = Allow(users=frozenset(v for _, v in users), channels=only)
    allow.finish()
    s.finish()
    if not s.present:
        return None
    values["allow"] = allows
    return BotConfig(**{k: v for k, v in values.items() if v is not None})

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
  routes:                         # a tree: first match wins unless it says `continue`; none: `channel`
    - {run: "llm-*", severity: critical, channel: C0ONCALL01, mention: [U01], continue: true}
    - project: [vision, detection]
      channel: C0VISION01
      routes: [{host: "dgx-*", rule: "gpu_*", channel: C0DGX00001}]
```
"""

from __future__ import annotations

from typing import Any

from trainwarden.bot.commands import COMMANDS
from trainwarden.bot.config import Allow, BotConfig, Route
from trainwarden.core.yamlfile import Reader, Schema
from trainwarden.policies.model import SEVERITIES  # what a route's `severity` may match
from trainwarden.remote.fleet import SLACK_USER_RE

# seconds, or `90s`, `10m`
DURATIONS = ("flap_window_s", "keep_running_snooze_s", "stop_outcome_wait_s", "deadman_s", "lease_s")
INTEGERS = ("burst", "flap_threshold")
MATCHERS = ("run", "project", "host", "rule")  # shell-style globs
ROUTE_DEPTH = 4  # levels of nested `routes` (deeper ones are reported as unknown keys)


def read_slack(s: Reader) -> BotConfig | None:
    """The bot's config; None when the section is absent (the defaults apply)."""
    values: dict[str, Any] = {}
    for key in ("channel", "http_host"):
        values[key] = s.string(key)
    values["rate_per_s"] = s.number("rate_per_s", positive=True)  # a rate, not a duration
    for key in DURATIONS:
        values[key] = s.seconds(key, positive=True)
    for key in INTEGERS:
        values[key] = s.integer(key, minimum=1)
    values["http_port"] = s.integer("http_port", minimum=1, maximum=65535)
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
    routes = [_route(r) for r in s.items("routes", "a slack.routes entry")]
    s.finish()
    if not s.present:
        return None
    values["allow"] = allows
    values["routes"] = tuple(routes) or None
    return BotConfig(**{k: v for k, v in values.items() if v is not None})


def _route(r: Reader, depth: int = 1) -> Route:
    """One node of the routing tree: matchers (a value or a list of alternatives) -> channel and mentions,
    `continue` and its own `routes` (bot/routing.py)."""
    values: dict[str, Any] = {key: r.strings(key) for key in MATCHERS}
    one: Schema = {"enum": list(SEVERITIES)}
    got = r.raw("severity", {"anyOf": [one, {"type": "array", "items": one, "minItems": 1}]})
    if got is not None:
        node, severity = got
        severities = [severity] if isinstance(severity, str) else severity
        if isinstance(severities, list) and severities and all(x in SEVERITIES for x in severities):
            values["severity"] = tuple(severities)
        else:
            r.ctx.problem(node, f"severity must be one of {', '.join(SEVERITIES)} or a list of them, got {severity!r}")
    values["channel"] = r.string("channel")
    mention = r.string_list("mention", pattern=SLACK_USER_RE, hint="is not a Slack user id like U0123ABCD",
                            expected="a list of Slack user ids like [U0123ABCD]")  # fmt: skip
    values["mention"] = tuple(v for _, v in mention)
    values["continue_"] = r.boolean("continue", default=False)
    if depth < ROUTE_DEPTH:
        values["routes"] = tuple(_route(c, depth + 1) for c in r.items("routes", "a slack.routes entry"))
    if r.present and r.ok and not any(r.has(key) for key in ("channel", "mention", "routes")):
        r.ctx.problem(r.node, "a slack.routes entry needs a 'channel' or a 'mention' list")
    r.finish()
    return Route(**values)

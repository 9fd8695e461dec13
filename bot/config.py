"""The bot's settings (the `slack:` section of the settings file), as plain frozen records.

What /launch may start is the fleet's experiments (servers_file, experiments_dir), not this.

Secrets (SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, SLACK_APP_TOKEN) are not here: they come from the
environment when the bot is wired and are never stored, logged or posted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

HELP = "help"  # `/tw help` (and a bare `/tw`): the list of subcommands; needs no allow-list
RATE_PER_S = 1.0  # messages per second per channel (Slack allows about one, with short bursts)
BURST = 4  # messages a channel may take at once before the rate applies
FLAP_THRESHOLD = 3  # openings of one (run, rule) within FLAP_WINDOW_S before it is reported as flapping
FLAP_WINDOW_S = 3600.0  # seconds
KEEP_RUNNING_SNOOZE_S = 3600.0  # seconds a rule stays snoozed after "Keep running"
STOP_OUTCOME_WAIT_S = 5.0  # seconds a STOP the breaker may hold waits for its outcome before it is posted anyway
DEADMAN_S = 120.0  # seconds without dispatcher heartbeat or with a stuck feed entry before the bot alerts
LEASE_S = 15.0  # seconds the notifier lease runs unrenewed: a standby takes over at most this after its holder hangs
HTTP_HOST = "0.0.0.0"  # HTTP mode: address the endpoint listens on
HTTP_PORT = 3000  # HTTP mode: port of the endpoint Slack posts commands and clicks to


@dataclass(frozen=True, slots=True, kw_only=True)
class Allow:
    """Who may run one command: Slack user ids, and optionally the channels it may be run from."""

    users: frozenset[str] = frozenset()
    channels: frozenset[str] | None = None  # None: any channel

    def permits(self, *, user: str, channel: str | None) -> bool:
        if user not in self.users:
            return False
        return self.channels is None or channel in self.channels


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """One node of the `slack.routes` tree: matchers (each a set of alternatives; empty matches anything)
    and where a matching message goes. `run`, `project`, `host` and `rule` hold shell-style globs
    (`exp01-*`); `severity` exact values. Its `routes` refine it (the first matching child decides, unless
    that child says `continue`); `channel` None inherits the parent's (at the top: the default channel)."""

    run: tuple[str, ...] = ()
    project: tuple[str, ...] = ()
    host: tuple[str, ...] = ()
    rule: tuple[str, ...] = ()
    severity: tuple[str, ...] = ()
    channel: str | None = None  # None: the parent's channel (the route only adds mentions)
    mention: tuple[str, ...] = ()  # Slack user ids mentioned on messages that need someone
    continue_: bool = False  # after matching, go on to the next sibling (a message in two channels)
    routes: tuple[Route, ...] = ()  # children, tried in order


@dataclass(frozen=True, slots=True, kw_only=True)
class BotConfig:
    channel: str | None = None  # the default channel: messages no route matches, trainwarden's own alerts
    routes: tuple[Route, ...] = ()  # the routing tree's top level (bot/routing.py)
    allow: Mapping[str, Allow] = field(default_factory=dict)  # command -> allow-list; missing: nobody
    rate_per_s: float = RATE_PER_S
    burst: int = BURST
    flap_threshold: int = FLAP_THRESHOLD
    flap_window_s: float = FLAP_WINDOW_S
    keep_running_snooze_s: float = KEEP_RUNNING_SNOOZE_S
    stop_outcome_wait_s: float = STOP_OUTCOME_WAIT_S  # a holdable STOP waits this long for its outcome
    deadman_s: float = DEADMAN_S
    lease_s: float = LEASE_S
    http_host: str = HTTP_HOST
    http_port: int = HTTP_PORT

    def allows(self, command: str, *, user: str, channel: str | None) -> bool:
        allow = self.allow.get(command)
        return allow is not None and allow.permits(user=user, channel=channel)

"""The bot's settings (the `slack:` section of the settings file), as plain frozen records.

What /launch may start is the fleet's experiments (servers_file, experiments_dir), not this.

Secrets (SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, SLACK_APP_TOKEN) are not here: they come from the
environment when the bot is wired and are never stored, logged or posted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from trainwarden import defaults

COMMANDS = ("status", "launch", "stop", "snooze")


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
class BotConfig:
    channel: str | None = None
    allow: Mapping[str, Allow] = field(default_factory=dict)  # command -> allow-list; missing: nobody
    rate_per_s: float = defaults.SLACK_RATE_PER_S
    burst: int = defaults.SLACK_BURST
    flap_threshold: int = defaults.FLAP_THRESHOLD
    flap_window_s: float = defaults.FLAP_WINDOW_S
    keep_running_snooze_s: float = defaults.KEEP_RUNNING_SNOOZE_S
    deadman_s: float = defaults.DEADMAN_S
    http_host: str = defaults.SLACK_HTTP_HOST
    http_port: int = defaults.SLACK_HTTP_PORT

    def allows(self, command: str, *, user: str, channel: str | None) -> bool:
        allow = self.allow.get(command)
        return allow is not None and allow.permits(user=user, channel=channel)

"""SIGHUP for the bot: which `slack:` settings take effect without a restart, and putting them in force.

Routes, the default channel, the commands' allow-lists, snoozes, flap collapse and the dead-man's switch
are read per message or per request, so a new value simply replaces the old one (a removed user is
refused from the next command on). The rate limit and the HTTP address are fixed when the bot starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

from trainwarden.bot.config import BotConfig
from trainwarden.bot.notifier import Notifier
from trainwarden.bot.stages import Pipeline

LIVE = ("channel", "routes", "allow", "keep_running_snooze_s", "flap_threshold", "flap_window_s", "deadman_s")


class HasConfig(Protocol):
    """What reads the allow-lists per request (the command handlers, the authorization middleware)."""

    config: BotConfig


def differences(old: BotConfig, new: BotConfig) -> tuple[list[str], list[str]]:
    """The `slack.` settings that changed: (put in force by a reload, taking effect at a restart)."""
    changed = [f.name for f in dataclasses.fields(BotConfig) if getattr(old, f.name) != getattr(new, f.name)]
    return [f"slack.{n}" for n in changed if n in LIVE], [f"slack.{n}" for n in changed if n not in LIVE]


def apply(new: BotConfig, *, notifier: Notifier, holders: Sequence[HasConfig] = (), slack: bool) -> None:
    """Put `new` in force (attribute by attribute: each is read whole by the threads that use it)."""
    notifier.routes = new.routes
    if slack:  # the console notifier has no channels
        notifier.channel = new.channel or ""
    notifier.snooze_s = new.keep_running_snooze_s
    notifier.pipeline = Pipeline(flap_threshold=new.flap_threshold, flap_window_s=new.flap_window_s)  # stateless
    if notifier.deadman is not None:
        notifier.deadman.stall_s = new.deadman_s
    for holder in holders:
        holder.config = new

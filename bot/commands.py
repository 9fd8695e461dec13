"""The registry of slash commands, and slash-command text in, a validated request out; pure, nothing runs here.

Each command is one object (bot/slash/base.py `Command`: parse, authorize, handle, usage) in its own
module under bot/slash/, registered once in `REGISTRY` below; the allow-list names, /tw help, the
listeners of bot/app.py, the audit's names (bot/authz.py) and the manifest's command list
(bot/manifest.py) are all read from it. Slack's slash commands are not namespaced, so the bot ships
one command, `/tw SUBCOMMAND ...` (`NAMESPACE`); the old top-level names (`/status`, `/stop`, ...)
reach the same parser with the subcommand as the name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainwarden.bot import replies
from trainwarden.bot.config import HELP
from trainwarden.bot.errors import BadInput
from trainwarden.bot.slash.base import Command, Context, Reply
from trainwarden.bot.slash.launch import FORCE, Launch, LaunchCommand
from trainwarden.bot.slash.snooze import Snooze, SnoozeCommand
from trainwarden.bot.slash.status import STATUS_ALL, Status, StatusCommand
from trainwarden.bot.slash.stop import Stop, StopCommand
from trainwarden.bot.slash.text import (
    DEFAULT_STOP_REASON,
    MAX_SNOOZE_S,
    MAX_TEXT,
    METACHARACTERS,
    check_name,
    check_text,
    closest,
    snooze_duration,
)
from trainwarden.ops.status_messages import NAMESPACE

__all__ = [
    "COMMANDS", "DEFAULT_STOP_REASON", "FORCE", "MAX_SNOOZE_S", "MAX_TEXT", "METACHARACTERS", "REGISTRY",
    "STATUS_ALL", "Help", "Launch", "Snooze", "Status", "Stop", "allow_name", "check_name", "check_text",
    "closest", "command_for", "help_text", "named", "parse", "snooze_duration", "split_namespaced",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Help:
    """`/tw help`: what each subcommand does."""


class HelpCommand(Command[Help]):
    """`/tw help` (and a bare `/tw`, and an unknown subcommand's reply): the registry's own listing."""

    name = HELP
    args = ""
    what = "this list"
    summary = "What each subcommand does"
    request = Help
    open_to_all = True

    def parse(self, text: str) -> Help:
        return Help()

    def handle(self, request: Help, ctx: Context, *, user: str) -> Reply:
        return Reply(help_text())


# The one list of commands, in /tw help's order. A new command: its module under bot/slash/, one entry here.
REGISTRY: tuple[Command[Any], ...] = (StatusCommand(), LaunchCommand(), StopCommand(), SnoozeCommand(), HelpCommand())
_BY_NAME = {c.name: c for c in REGISTRY}
_BY_REQUEST = {c.request: c for c in REGISTRY}
COMMANDS = tuple(c.name for c in REGISTRY if not c.open_to_all)  # the subcommands with an allow-list (and old names)


def named(name: str) -> Command[Any]:
    """The command an allow-list name (`allow_name`) stands for."""
    return _BY_NAME[name]


def command_for(request: object) -> Command[Any]:
    """The command that parsed `request`, to handle it."""
    return _BY_REQUEST[type(request)]


def help_text() -> str:
    return replies.help_text([(c.name, c.args, c.what) for c in REGISTRY])


def split_namespaced(text: str) -> tuple[str, str]:
    """`/tw`'s text as (subcommand, the rest): ("stop", "exp01 lr too high"); a bare `/tw` is help."""
    head, _, rest = text.strip().partition(" ")
    return (head.lower() or HELP), rest.strip()


def allow_name(command: str, text: str) -> str:
    """The allow-list a slash command is checked against: `/tw stop ...` and `/stop ...` both `stop`;
    `/tw help` and an unknown `/tw` subcommand `help` (answered to anyone: they run nothing)."""
    name = split_namespaced(text)[0] if command == NAMESPACE else command
    return name if name in COMMANDS else HELP


def parse(command: str, text: str) -> object:
    """`command` without its slash ("tw", or an old name like "stop"), `text` as Slack sent it: the request
    of one of `REGISTRY`'s types (`command_for` finds its command); raises BadInput saying what is wrong."""
    check_text(text)
    if command == NAMESPACE:
        sub, rest = split_namespaced(text)
        if sub not in _BY_NAME:
            raise BadInput(replies.unknown_subcommand(sub, closest(sub, _BY_NAME), help_text()))
        return _BY_NAME[sub].parse(rest)
    return _BY_NAME[command].parse(text)

"""What a slash command is: one object with `name`, `parse`, `authorize`, `handle` and `usage`.

`handle` gets a `Context` (bot/handlers.py's Handlers is one), not the bot's parts, so a command's
module imports nothing above it and a new command needs no change anywhere but its module and the
registry (bot/commands.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from trainwarden.bot import replies
from trainwarden.bot.config import BotConfig
from trainwarden.events.backend import RecentLog
from trainwarden.events.envelope import Event
from trainwarden.remote.fleet import Fleet


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    in_channel: bool = False
    then: Callable[[], None] | None = None


class Launcher(Protocol):
    def launch(self, experiment: str, *, user: str, force: bool = False) -> Event:
        """Start the experiment on its server (records `run.launched` with `requested_by`); raises a
        TrainwardenError saying why not."""
        ...

    def held(self, experiment: str) -> str | None:
        """Why a plan holds the experiment back, with the fix in /launch's words; None if none does."""
        ...


class Context(Protocol):
    """What a command may use: the store (any backend: events/backend.py), the settings, the fleet, and the
    checks every command shares."""

    config: BotConfig
    fleet: Fleet | None
    launcher: Launcher | None

    @property
    def store(self) -> RecentLog:
        """Read-only here, so a context holding a narrower store (the bot's EventStore) is one."""
        ...

    def append(self, event_type: str, run: str, data: Mapping[str, object]) -> Event: ...

    def known_run(self, name: str) -> str:
        """`name` if it is a run in the store; else BadInput with the closest names."""
        ...

    def ended(self, run: str) -> str | None:
        """The run's status if it has ended (stopped, finished, failed); None while it can still be stopped."""
        ...


Request = TypeVar("Request")


class Command(Generic[Request]):
    """One subcommand of `/tw` (and, for those with an allow-list, its old top-level name `/NAME`).

    `args` and `what` make its line in /tw help and its usage error; `summary` its manifest entry.
    `request` is the type `parse` returns, by which a parsed request finds its command again."""

    name: ClassVar[str]
    args: ClassVar[str]
    what: ClassVar[str]
    summary: ClassVar[str]
    request: ClassVar[type]
    open_to_all: ClassVar[bool] = False  # runs nothing: answered to anyone, no allow-list of its own

    def parse(self, text: str) -> Request:
        """The request `text` (what follows the subcommand) asks for; raises BadInput with the usage."""
        raise NotImplementedError

    def authorize(self, *, user: str, channel: str | None, config: BotConfig) -> bool:
        """Whether `user` may run it from `channel`: the command's allow-list in `slack.allow`."""
        return self.open_to_all or config.allows(self.name, user=user, channel=channel)

    def handle(self, request: Request, ctx: Context, *, user: str) -> Reply:
        raise NotImplementedError

    @property
    def usage(self) -> str:
        return replies.usage(self.name, self.args, self.what)

"""Errors of the Slack bot.

TrainwardenError (trainwarden.core.errors)
└── BotError                       the Slack bot
    ├── SlackError                 talking to Slack's Web API failed
    │   ├── SlackUnavailable       5xx, connection reset, timeouts after retries (retried later)
    │   └── SlackRejected          Slack answered ok=false: a setup problem (bad token, unknown channel;
    │                              retried later) or this one message (recorded, sent once as plain text)
    ├── NotifierBusy               `bot --burst` while another notifier holds the notifier lease
    ├── EndpointUnavailable        HTTP mode: the endpoint's address cannot be listened on (port taken)
    └── CommandError               a slash command or button that is not carried out
        ├── BadInput               refused input (unknown name, shell metacharacters, too long)
        └── NotAllowed             the user or channel is not on the command's allow-list
"""

from __future__ import annotations

from trainwarden.core.errors import TrainwardenError


class BotError(TrainwardenError):
    """Base class of errors raised by the bot."""


class SlackError(BotError):
    """A call to Slack's Web API failed."""


class SlackUnavailable(SlackError):
    """Slack could not be reached or failed on its side; the notification stays pending and is retried."""


class SlackRejected(SlackError):
    """Slack refused the call (ok=false) with `error` (its error code). With `setup` (token, scopes,
    channel) nothing can be posted until the setup is fixed; otherwise only this message is refused."""

    def __init__(self, message: str, *, error: str = "", setup: bool = False, **context: object) -> None:
        super().__init__(message, **context)
        self.error = error
        self.setup = setup


class NotifierBusy(BotError):
    """Another notifier holds the notifier lease (bot/keeper.py); a --burst run does not wait for it."""


class EndpointUnavailable(BotError):
    """HTTP mode: the endpoint cannot listen where it is told to (the port is taken, the address not ours)."""


class CommandError(BotError):
    """A command that is refused; its message is shown to the user as it is."""


class BadInput(CommandError):
    """The command's text is refused before anything runs."""


class NotAllowed(CommandError):
    """The user (or channel) is not allowed to run the command."""

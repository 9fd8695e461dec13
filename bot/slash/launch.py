"""`/tw launch EXPERIMENT [SERVER] [--force]`: start a configured experiment on its server.

The reply goes first; the launch (SSH, seconds) runs after it, and a failure is recorded as
`launch.failed` in the run's log, which the notifier posts in the run's thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from trainwarden.bot import replies
from trainwarden.bot.errors import BadInput
from trainwarden.bot.slash.base import Command, Context, Reply
from trainwarden.bot.slash.text import check_name, name_arg
from trainwarden.core.errors import TrainwardenError
from trainwarden.core.redact import redact_text
from trainwarden.events import payloads as p
from trainwarden.events import types as t

log = logging.getLogger(__name__)

FORCE = "--force"


@dataclass(frozen=True, slots=True)
class Launch:
    experiment: str
    server: str | None
    force: bool = False  # `--force`: launch although a plan holds it back (recorded in the launch)


class LaunchCommand(Command[Launch]):
    name = "launch"
    args = f"EXPERIMENT [SERVER] [{FORCE}]"
    what = "launch a configured experiment on its server"
    summary = "Launch a configured experiment"
    request = Launch

    def parse(self, text: str) -> Launch:
        words = text.split()
        force = FORCE in words
        words = [w for w in words if w != FORCE]
        if 1 <= len(words) <= 2:
            server = name_arg(words[1], self.usage) if len(words) == 2 else None
            return Launch(experiment=name_arg(words[0], self.usage), server=server, force=force)
        raise BadInput(self.usage)

    def handle(self, request: Launch, ctx: Context, *, user: str) -> Reply:
        fleet, launcher = ctx.fleet, ctx.launcher
        if fleet is None or launcher is None:
            raise BadInput(replies.no_experiments())
        exp = fleet.experiments[check_name("experiment", request.experiment, fleet.experiments)]
        if request.server is not None and check_name("server", request.server, fleet.servers) != exp.server:
            raise BadInput(replies.refused(replies.wrong_server(exp.name, exp.server, request.server)))
        if not request.force and (held := launcher.held(exp.name)):
            return Reply(replies.refused(held))

        def perform() -> None:
            try:
                launcher.launch(exp.name, user=user, force=request.force)
            except TrainwardenError as exc:
                log.warning("launch of %s failed: %s", exp.name, exc)
                error = redact_text(str(exc))
                failed: p.LaunchFailedData = {"by": "slack", "server": exp.server, "user": user, "error": error}
                ctx.append(t.LAUNCH_FAILED, exp.name, failed)

        return Reply(replies.launching(exp.name, exp.server), then=perform)

"""`/tw status [RUN | all]`: the active runs, the most urgent first; `all` adds ended runs; or one run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainwarden.bot.errors import BadInput
from trainwarden.bot.slash.base import Command, Context, Reply
from trainwarden.bot.slash.text import name_arg
from trainwarden.ops import status

STATUS_ALL = "all"  # `/status all`: every run, ended ones too (so no run named `all` can be asked about)


@dataclass(frozen=True, slots=True)
class Status:
    run: str | None
    everything: bool = False  # `/status all`: ended runs too


class StatusCommand(Command[Status]):
    name = "status"
    args = "[RUN | all]"
    what = "active runs, the most urgent first; `all` adds ended runs; or one run in detail"
    summary = "Active runs, or one run"
    request = Status

    def parse(self, text: str) -> Status:
        words = text.split()
        if words == [STATUS_ALL]:
            return Status(run=None, everything=True)
        if len(words) <= 1:
            return Status(run=name_arg(words[0], self.usage) if words else None)
        raise BadInput(self.usage)

    def handle(self, request: Status, ctx: Context, *, user: str) -> Reply:
        if request.run is None:
            later: list[Callable[[], None]] = []
            text = status.overview(ctx.store, everything=request.everything, later=later)
            return Reply(text, then=later[0] if later else None)
        return Reply(status.detail(ctx.store, ctx.known_run(request.run)))

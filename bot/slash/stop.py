"""`/tw stop RUN [REASON]`: a private prompt with a Stop button; the click (bot/handlers.py) asks the workers."""

from __future__ import annotations

from dataclasses import dataclass

from trainwarden.bot import blocks, replies
from trainwarden.bot.errors import BadInput
from trainwarden.bot.slash.base import Command, Context, Reply
from trainwarden.bot.slash.text import DEFAULT_STOP_REASON, name_arg
from trainwarden.core.redact import redact_text


@dataclass(frozen=True, slots=True)
class Stop:
    run: str
    reason: str


class StopCommand(Command[Stop]):
    name = "stop"
    args = "RUN [REASON]"
    what = "stop a run (asks for confirmation)"
    summary = "Stop a run (asks for confirmation)"
    request = Stop

    def parse(self, text: str) -> Stop:
        words = text.split()
        if not words:
            raise BadInput(self.usage)
        return Stop(run=name_arg(words[0], self.usage), reason=" ".join(words[1:]) or DEFAULT_STOP_REASON)

    def handle(self, request: Stop, ctx: Context, *, user: str) -> Reply:
        run = ctx.known_run(request.run)
        if ended := ctx.ended(run):
            return Reply(replies.already_ended(run, ended))  # and no Stop button
        reason = redact_text(request.reason)
        return Reply(replies.stop_confirm(run, reason), blocks=blocks.stop_prompt(run, reason))

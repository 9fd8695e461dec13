"""`/tw snooze RUN [RULE] DURATION`: a `snooze.set` in the run's log; the notifier holds its anomalies back."""

from __future__ import annotations

import time
from dataclasses import dataclass

from trainwarden.bot import replies
from trainwarden.bot.errors import BadInput
from trainwarden.bot.slash.base import Command, Context, Reply
from trainwarden.bot.slash.text import name_arg, snooze_duration
from trainwarden.events import payloads as p
from trainwarden.events import types as t


@dataclass(frozen=True, slots=True)
class Snooze:
    run: str
    rule: str | None
    seconds: float


class SnoozeCommand(Command[Snooze]):
    name = "snooze"
    args = "RUN [RULE] DURATION"
    what = "silence a run's anomalies (or one rule) for a while, like 30m, 1h30m, 2d"
    summary = "Silence a run's anomalies for a while"
    request = Snooze

    def parse(self, text: str) -> Snooze:
        words = text.split()
        if len(words) not in (2, 3):
            raise BadInput(self.usage)
        rule = name_arg(words[1], self.usage) if len(words) == 3 else None
        return Snooze(run=name_arg(words[0], self.usage), rule=rule, seconds=snooze_duration(words[-1]))

    def handle(self, request: Snooze, ctx: Context, *, user: str) -> Reply:
        run = ctx.known_run(request.run)
        until = time.time() + request.seconds
        snoozed: p.SnoozeSetData = {"by": "slack", "rule": request.rule, "until": until, "user": user,
                                    "seconds": request.seconds}  # fmt: skip
        ctx.append(t.SNOOZE_SET, run, snoozed)
        return Reply(replies.snoozed(run, request.rule, until, user), in_channel=True)

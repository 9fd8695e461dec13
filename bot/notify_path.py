"""The notify path after noise control, as stages, the way Alertmanager builds its pipeline:

    select -> inhibit -> snooze -> dedup -> group -> flap      bot/stages.py (`Pipeline`, pure)
    -> route        bot/routing.py `address`: the routing tree, one `Outgoing` per channel (pure)
    -> render       bot/render.py: text and blocks, once per message (pure)
    -> rate-limit   bot/rate.py `RateLimit`: the channel's turn
    -> deliver      bot/delivery.py: exactly once, keyed by the event's id
    -> follow-ups   bot/follow_ups.py: the parent's refresh, the guard's close

Every stage before render carries a structured notice (bot/stages.py `Notice`), so what is dropped
costs no text and what is posted is worded once. The notifier (bot/notifier.py) feeds it the notices
that noise control let through, with the run's trend (read once per feed entry).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainwarden.bot.config import Route
from trainwarden.bot.delivery import INTENT, Delivery
from trainwarden.bot.follow_ups import FollowUps
from trainwarden.bot.rate import RateLimit
from trainwarden.bot.render import render
from trainwarden.bot.routing import Outgoing, address
from trainwarden.bot.stages import Notice, NotifyState, posted


class NotifyPath:
    def __init__(self, *, delivery: Delivery, rate: RateLimit, follow_ups: FollowUps) -> None:
        self.delivery = delivery
        self.rate = rate
        self.follow_ups = follow_ups

    def post(
        self,
        state: NotifyState,
        notice: Notice,
        *,
        tree: Route,
        trend: tuple[str, list[float]] | None,
        snooze_s: float,
        fresh: bool,
    ) -> None:
        """Route, render, pace and deliver `notice` (once per channel it goes to), then its follow-ups.
        `fresh`: no notifier has tried its feed entry, so there is no status to read."""
        for out in address(state, notice, tree=tree):
            message = render(out, state=state, trend=trend, snooze_s=snooze_s)
            status: dict[str, Any] | None = None if fresh else self.delivery.status(message.run, message.key)
            if status is None or status["state"] == INTENT:  # to be posted (or looked for): its turn
                message = self.rate(message)
            ts = self.delivery.deliver(message, status=status, after_post=self._follow_ups(state, out))
            if ts is not None:
                posted(state, message.channel, message.text, ts)

    def _follow_ups(self, state: NotifyState, out: Outgoing) -> Callable[[str], None]:
        return lambda _ts: self.follow_ups(state, out)

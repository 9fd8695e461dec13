"""Slack's pace: a token bucket per channel, and the one wait for a turn that both the notify path's
rate-limit stage (bot/notify_path.py) and the Slack sink's other calls (bot/slack_sink.py) use.

A notification takes its channel's token in the rate-limit stage, before delivery, so the wait is the
path's own step (declared to the notifier's `Liveness`, so its heartbeat says what it waits for); the
sink then sends it at once, holding back only for a Retry-After Slack asked for meanwhile. Updates,
uploads and command replies are paced by the sink itself, with the same bucket.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from trainwarden.bot.sink import Message
from trainwarden.events.heartbeat import Liveness


class RateLimiter:
    """A token bucket per channel; `pause` holds a channel back (after a 429)."""

    def __init__(self, *, rate_per_s: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate_per_s
        self.burst = float(burst)
        self.clock = clock
        self._tokens: dict[str, float] = {}
        self._stamp: dict[str, float] = {}
        self._paused_until: dict[str, float] = {}

    def delay(self, channel: str) -> float:
        """Seconds to wait before the next post to `channel` (0 when it may go now; then it is counted)."""
        held = self.held(channel)
        if held > 0:
            return held
        now = self.clock()
        refill = (now - self._stamp.get(channel, now)) * self.rate
        tokens = min(self.burst, self._tokens.get(channel, self.burst) + refill)
        self._stamp[channel] = now
        if tokens >= 1:
            self._tokens[channel] = tokens - 1
            return 0.0
        self._tokens[channel] = tokens
        return (1 - tokens) / self.rate

    def held(self, channel: str) -> float:
        """Seconds left of a pause Slack asked for (429 Retry-After)."""
        return max(0.0, self._paused_until.get(channel, 0.0) - self.clock())

    def pause(self, channel: str, seconds: float) -> None:
        self._paused_until[channel] = max(self._paused_until.get(channel, 0.0), self.clock() + seconds)


def wait_turn(
    limiter: RateLimiter, channel: str, *, what: str, counted: bool, liveness: Liveness, sleep: Callable[[float], None]
) -> None:
    """Wait until `channel` may take a call (`counted`: it takes a token; else only a Retry-After holds it)."""
    while (wait := limiter.delay(channel) if counted else limiter.held(channel)) > 0:
        held = limiter.held(channel)
        why = f"waiting out Slack's Retry-After {held:.0f} s" if held else f"waiting {wait:.1f} s for the rate limit"
        with liveness.waiting(f"{why} ({what} to {channel})", wait):
            sleep(wait)


class RateLimit:
    """The rate-limit stage: a rendered notification waits for its channel's turn, then goes out paced.
    Without a limiter (a sink with no pace of its own: the console) messages pass at once."""

    def __init__(
        self, limiter: RateLimiter | None, *, liveness: Liveness, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.limiter = limiter
        self.liveness = liveness
        self.sleep = sleep

    def __call__(self, message: Message) -> Message:
        if self.limiter is None:
            return message
        wait_turn(self.limiter, message.channel, what="chat.postMessage", counted=True, liveness=self.liveness,
                  sleep=self.sleep)  # fmt: skip
        return dataclasses.replace(message, paced=True)

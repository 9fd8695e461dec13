"""The render stage of the notify path: a routed notice becomes the words and blocks of one Slack
message, once, after every stage that could drop it (noise control, routing) has run.

Pure: the text comes from bot/stages.py `headline` (bot/messages.py's builders), the blocks from
bot/blocks.py; nothing here touches I/O, so a notice that is inhibited, snoozed or deduplicated costs
no text at all.
"""

from __future__ import annotations

from trainwarden.bot import messages
from trainwarden.bot.blocks import notice_blocks
from trainwarden.bot.routing import Outgoing
from trainwarden.bot.sink import Message
from trainwarden.bot.stages import NotifyState, headline


def render(out: Outgoing, *, state: NotifyState, trend: tuple[str, list[float]] | None, snooze_s: float) -> Message:
    """The message for `out`: its headline naming who must act, its blocks, into the run's thread there."""
    notice, channel = out.notice, out.destination.channel
    text = messages.with_mentions(headline(notice), out.mentions)
    thread = state.threads.get(channel)
    blocks = notice_blocks(notice, state=state, trend=trend, snooze_s=snooze_s, text=text)
    return Message(key=out.key, run=notice.event.run, channel=channel, text=text, blocks=blocks, thread_ts=thread,
                   broadcast=notice.broadcast and thread is not None)  # fmt: skip

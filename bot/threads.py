"""Which run a message in a Slack thread is about, for the message shortcut "Run actions".

Slack does not deliver slash commands typed in a thread, so a thread's actions are buttons and a message
shortcut. Every message the bot posts carries its run in its metadata (bot/sink.py); a person's reply in
a run's thread does not, so the thread's parent (the run's first message) is read back for it.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError
from trainwarden.bot.sink import METADATA_TYPE

log = logging.getLogger(__name__)


def run_in_metadata(message: dict[str, Any]) -> str | None:
    """Pure: the run a message posted by the bot names in its metadata; None for any other message."""
    meta = message.get("metadata")
    if not isinstance(meta, dict) or meta.get("event_type") != METADATA_TYPE:
        return None
    run = (meta.get("event_payload") or {}).get("run")
    return run if isinstance(run, str) and run else None


def thread_run(client: WebClient, *, channel: str | None, message: dict[str, Any]) -> str | None:
    """The run of `message`'s thread: its own metadata, else its thread parent's (one conversations.replies
    call); None when neither names one (a message outside a run's thread) or Slack cannot be read."""
    run = run_in_metadata(message)
    parent = message.get("thread_ts") or message.get("ts")
    if run is not None or not channel or not parent:
        return run
    try:
        page = client.conversations_replies(channel=channel, ts=str(parent), limit=1, include_all_metadata=True)
    except SlackClientError as exc:  # the shortcut then says it found no run: the person can use /tw
        log.warning("cannot read the parent of thread %s in %s to find its run: %s", parent, channel, exc)
        return None
    messages = page.get("messages") or []
    return run_in_metadata(messages[0]) if messages and isinstance(messages[0], dict) else None

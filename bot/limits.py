"""Slack's size limits, and the one pure function that fits every outgoing message to them.

Slack refuses a whole message (`invalid_blocks`, `msg_too_long`) when one part is over its limit,
so a long launch error or reason would otherwise cost the notification. Every message the bot
sends (posts, updates, command replies) goes through `fit_message`: texts are cut with a marker
saying how much was left out, lists are shortened, and button values (JSON the handlers read back)
have their longest strings shortened so they stay valid JSON. Numbers from Slack's Block Kit
reference (blocks, block elements, composition objects) and chat.postMessage.
"""

from __future__ import annotations

import json
from typing import Any

from trainwarden.bot import message_parts
from trainwarden.core.words import word_end

MESSAGE_TEXT = 40_000  # chat.postMessage `text` (msg_too_long above it)
BLOCKS = 50  # blocks in one message
SECTION_TEXT = 3_000  # a section's text
SECTION_FIELDS = 10  # a section's fields ...
FIELD_TEXT = 2_000  # ... and each field's text
CONTEXT_ELEMENTS = 10  # elements of a context block ...
CONTEXT_TEXT = 2_000  # ... and each text element's text
HEADER_TEXT = 150  # a header block's text
ACTION_ELEMENTS = 25  # elements of an actions block
BUTTON_TEXT = 75  # a button's label
BUTTON_VALUE = 2_000  # a button's value
ACTION_ID = 255  # action_id and block_id
CONFIRM_TITLE = 100  # a confirmation dialog's title ...
CONFIRM_TEXT = 300  # ... its text ...
CONFIRM_BUTTON = 30  # ... and each of its two buttons
FALLBACK_TEXT = SECTION_TEXT  # the plain text sent once when Slack refused a message anyway


def clip(text: str, limit: int) -> str:
    """`text` if it fits, else its head and a marker saying how much was cut (never over `limit`)."""
    if len(text) <= limit:
        return text
    keep = word_end(text, max(0, limit - len(message_parts.truncated(len(text)))))  # the count has at most these digits
    return (text[:keep] + message_parts.truncated(len(text) - keep))[:limit]


def fit_value(value: str, limit: int = BUTTON_VALUE) -> str:
    """A button value within `limit`: a JSON object keeps being JSON (its longest strings are shortened)."""
    if len(value) <= limit:
        return value
    try:
        data = json.loads(value)
    except ValueError:
        return value[:limit]
    if not isinstance(data, dict):
        return value[:limit]
    while len(encoded := json.dumps(data, separators=(",", ":"))) > limit:
        texts = [k for k, v in data.items() if isinstance(v, str) and v]
        if not texts:
            return encoded[:limit]
        longest = max(texts, key=lambda k: len(data[k]))
        excess = len(encoded) - limit
        data[longest] = data[longest][: max(0, len(data[longest]) - max(excess, len(data[longest]) // 2))]
    return encoded


def _text(obj: Any, limit: int) -> Any:
    """A text object ({type, text}) with its text clipped; anything else as it is."""
    if isinstance(obj, dict) and isinstance(obj.get("text"), str):
        return {**obj, "text": clip(obj["text"], limit)}
    return obj


def _element(element: Any) -> Any:
    if not isinstance(element, dict):
        return element
    out = dict(element)
    if out.get("type") == "button":
        out["text"] = _text(out.get("text"), BUTTON_TEXT)
        if isinstance(out.get("value"), str):
            out["value"] = fit_value(out["value"])
        if isinstance(out.get("confirm"), dict):
            c = dict(out["confirm"])
            c["title"] = _text(c.get("title"), CONFIRM_TITLE)
            c["text"] = _text(c.get("text"), CONFIRM_TEXT)
            c["confirm"] = _text(c.get("confirm"), CONFIRM_BUTTON)
            c["deny"] = _text(c.get("deny"), CONFIRM_BUTTON)
            out["confirm"] = {k: v for k, v in c.items() if v is not None}
    if isinstance(out.get("action_id"), str):
        out["action_id"] = out["action_id"][:ACTION_ID]
    return out


def fit_block(block: dict[str, Any]) -> dict[str, Any]:
    """One block within its limits (kinds the bot does not build pass through unchanged)."""
    out = dict(block)
    kind = out.get("type")
    if isinstance(out.get("block_id"), str):
        out["block_id"] = out["block_id"][:ACTION_ID]
    if kind == "section":
        if "text" in out:
            out["text"] = _text(out["text"], SECTION_TEXT)
        if isinstance(out.get("fields"), list):
            out["fields"] = [_text(f, FIELD_TEXT) for f in out["fields"][:SECTION_FIELDS]]
        if "accessory" in out:
            out["accessory"] = _element(out["accessory"])
    elif kind == "header":
        out["text"] = _text(out.get("text"), HEADER_TEXT)
    elif kind == "context" and isinstance(out.get("elements"), list):
        out["elements"] = [_text(e, CONTEXT_TEXT) for e in out["elements"][:CONTEXT_ELEMENTS]]
    elif kind == "actions" and isinstance(out.get("elements"), list):
        out["elements"] = [_element(e) for e in out["elements"][:ACTION_ELEMENTS]]
    return out


def fit_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most BLOCKS blocks, each within its limits; a cut list ends with a section saying so."""
    fitted = [fit_block(b) for b in blocks]
    if len(fitted) > BLOCKS:
        dropped = len(fitted) - (BLOCKS - 1)
        note = {"type": "section", "text": {"type": "mrkdwn", "text": message_parts.blocks_left_out(dropped)}}
        fitted = [*fitted[: BLOCKS - 1], note]
    return fitted


def fit_message(text: str, blocks: list[dict[str, Any]] | None) -> tuple[str, list[dict[str, Any]]]:
    """The message's `text` and `blocks` as Slack accepts them (pure: the inputs are not changed)."""
    return clip(text, MESSAGE_TEXT), fit_blocks(list(blocks or []))


def fallback_text(text: str) -> str:
    """The plain text sent alone (no blocks) when Slack refused a fitted message anyway."""
    return clip(text, FALLBACK_TEXT)

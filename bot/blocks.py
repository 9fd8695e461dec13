"""Block Kit for notifications and command replies. Texts come from bot/messages.py; this module
only arranges them. Button values are small JSON objects the action handlers read back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from trainwarden.bot import message_parts, messages, replies
from trainwarden.bot.slash.text import DEFAULT_STOP_REASON, MAX_TEXT
from trainwarden.bot.stages import FLAPPING, GUARD, Notice, NotifyState
from trainwarden.core.words import shorten
from trainwarden.events import types as t
from trainwarden.events.payloads import AnomalyOpenedData, DecisionData

ACTION_STOP_NOW = "tw_stop_now"  # guarded stop: stop at once
ACTION_KEEP_RUNNING = "tw_keep_running"  # guarded stop: cancel it and snooze the rule
ACTION_STOP_RUN = "tw_stop_run"  # anomaly or /stop: stop the run (after Slack's confirm dialog)
ACTION_SNOOZE = "tw_snooze"  # anomaly: snooze its rule
ACTION_CANCEL = "tw_cancel"  # /stop: dismiss
ACTION_STATUS = "tw_status"  # a thread message: the run's status with its Stop and Snooze, privately
ACTION_BREAKER_RELEASE = "tw_breaker_release"  # the stop breaker's message: carry out every held stop
ACTION_BREAKER_CANCEL = "tw_breaker_cancel"  # ... or cancel them all: the runs keep running
ACTIONS = (ACTION_STOP_NOW, ACTION_KEEP_RUNNING, ACTION_STOP_RUN, ACTION_SNOOZE, ACTION_CANCEL, ACTION_STATUS,
           ACTION_BREAKER_RELEASE, ACTION_BREAKER_CANCEL)  # fmt: skip
SHORTCUT_RUN_ACTIONS = "tw_run_actions"  # the message shortcut (slack/manifest.yaml): what ACTION_STATUS shows
WITH_BUTTONS = frozenset({t.ANOMALY_OPENED, FLAPPING, t.WAIT, t.DECISION_SHADOW})


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def context(lines: Sequence[str]) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": line} for line in lines]}


def button(text: str, action_id: str, value: dict[str, Any], *, style: str | None = None,
           confirm: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {"type": "button", "text": {"type": "plain_text", "text": text}, "action_id": action_id,
                           "value": json.dumps(value, separators=(",", ":"))}  # fmt: skip
    if style:
        out["style"] = style
    if confirm:
        out["confirm"] = confirm
    return out


def stop_confirm_dialog(run: str) -> dict[str, Any]:
    return {
        "title": {"type": "plain_text", "text": message_parts.confirm_stop_title()},
        "text": {"type": "mrkdwn", "text": message_parts.confirm_stop_body(run)},
        "confirm": {"type": "plain_text", "text": message_parts.confirm_stop_yes()},
        "deny": {"type": "plain_text", "text": message_parts.BUTTON_CANCEL},
        "style": "danger",
    }


def notice_blocks(
    notice: Notice,
    *,
    state: NotifyState,
    trend: tuple[str, list[float]] | None,
    snooze_s: float,
    text: str | None = None,
) -> list[dict[str, Any]]:
    """A notice's blocks around `text` (its rendered line; default: its headline)."""
    text = notice.text if text is None else text
    d = cast(AnomalyOpenedData | DecisionData, notice.event.data)  # others have no remedy: .get gives None
    extra: list[str] = []
    if trend and trend[1]:
        extra.append(messages.metric_trend(*trend))
    remedy = d.get("remedy")
    if remedy and notice.kind in WITH_BUTTONS | {GUARD, t.STOP} and message_parts.remedy(remedy) not in text:
        extra.append(message_parts.remedy(remedy))  # an ANOMALY's line says it already: not twice
    if state.wandb_url:
        extra.append(message_parts.wandb_link(state.wandb_url))
    if state.evidence and notice.kind in (t.STOP_DONE, t.STOP_FAILED, GUARD, t.STOP):
        extra.append(message_parts.evidence_link(state.evidence))
    blocks = [section(text)]
    if extra:
        blocks.append(context(extra))
    run = notice.event.run
    value = {"run": run, "rule": notice.rule, "decision": notice.event.id}
    if notice.kind in WITH_BUTTONS:
        blocks.append({"type": "actions", "elements": [
            button(message_parts.button_snooze(snooze_s), ACTION_SNOOZE, {**value, "seconds": snooze_s}),
            button(message_parts.BUTTON_STOP_RUN, ACTION_STOP_RUN,
                   {**value, "reason": shorten(text, MAX_TEXT)},  # the stop's reason, whole words
                   style="danger", confirm=stop_confirm_dialog(run)),
            status_button(run),
        ]})  # fmt: skip
    elif notice.kind == GUARD:
        blocks.append(guard_actions(value))
    return blocks


def guard_actions(value: dict[str, Any]) -> dict[str, Any]:
    return {"type": "actions", "elements": [
        button(message_parts.BUTTON_STOP_NOW, ACTION_STOP_NOW, value, style="danger"),
        button(message_parts.BUTTON_KEEP_RUNNING, ACTION_KEEP_RUNNING, value, style="primary"),
    ]}  # fmt: skip


def breaker_blocks(text: str, episode: str) -> list[dict[str, Any]]:
    """The stop breaker's message: what is held, Release all and Cancel all (for its episode only)."""
    value = {"episode": episode}
    return [section(text), {"type": "actions", "elements": [
        button(message_parts.BUTTON_RELEASE_ALL, ACTION_BREAKER_RELEASE, value, style="danger"),
        button(message_parts.BUTTON_CANCEL_ALL, ACTION_BREAKER_CANCEL, value, style="primary"),
    ]}]  # fmt: skip


def status_button(run: str) -> dict[str, Any]:
    return button(message_parts.BUTTON_STATUS, ACTION_STATUS, {"run": run})


def run_panel(run: str, text: str, *, ended: bool, snooze_s: float) -> list[dict[str, Any]]:
    """A run's status with its actions (the Status button's and the shortcut's private reply): Snooze,
    and Stop run while the run has not ended (a stopped run offers no Stop)."""
    value = {"run": run, "rule": None}
    actions = [button(message_parts.button_snooze(snooze_s), ACTION_SNOOZE, {**value, "seconds": snooze_s})]
    if not ended:
        actions.append(button(message_parts.BUTTON_STOP_RUN, ACTION_STOP_RUN,
                              {**value, "reason": DEFAULT_STOP_REASON}, style="danger",
                              confirm=stop_confirm_dialog(run)))  # fmt: skip
    return [section(text), {"type": "actions", "elements": actions}]


def text_blocks(text: str) -> list[dict[str, Any]]:
    """A closed message (guard decided, parent refreshed): the text alone, no buttons."""
    return [section(text)]


def stop_prompt(run: str, reason: str) -> list[dict[str, Any]]:
    """/stop's ephemeral confirmation."""
    value = {"run": run, "reason": reason}
    return [
        section(replies.stop_confirm(run, reason)),
        {"type": "actions", "elements": [
            button(message_parts.BUTTON_STOP_RUN, ACTION_STOP_RUN, value, style="danger"),
            button(message_parts.BUTTON_CANCEL, ACTION_CANCEL, value),
        ]},
    ]  # fmt: skip

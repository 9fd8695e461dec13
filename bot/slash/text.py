"""What every command's text must pass, and the argument checks commands share; pure.

Refused before anything else: text that looks like a secret (never echoed back), text over 200
characters, control characters, and shell metacharacters (no command of the bot needs them;
refusing them keeps every name and reason inert wherever it later travels: tmux session names,
log paths, Slack messages).
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable

from trainwarden.bot import replies
from trainwarden.bot.errors import BadInput
from trainwarden.core.redact import looks_secret
from trainwarden.events.envelope import RUN_NAME_RE
from trainwarden.policies.durations import parse_duration

MAX_TEXT = 200
METACHARACTERS = frozenset(";&|`$<>\\(){}[]*?!~#'\"")
MAX_SNOOZE_S = 7 * 86400
DEFAULT_STOP_REASON = "stopped from Slack"


def check_text(text: str) -> None:
    """Raise BadInput saying why `text` is refused; text that looks like a secret is never echoed."""
    if looks_secret(text):
        raise BadInput(replies.refused(replies.looks_like_secret()))
    if len(text) > MAX_TEXT:
        raise BadInput(replies.refused(replies.too_long(MAX_TEXT, len(text))))
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text):
        raise BadInput(replies.refused(replies.control_chars()))
    found = sorted(set(text) & METACHARACTERS)
    if found:
        raise BadInput(replies.refused(replies.forbidden_chars(" ".join(found))))


def closest(name: str, candidates: Iterable[str]) -> list[str]:
    return difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.5)


def check_name(kind: str, name: str, known: Iterable[str]) -> str:
    """`name` if it is one of `known`; else BadInput listing the closest names."""
    known = list(known)
    if name in known:
        return name
    raise BadInput(replies.unknown_name(kind, name, closest(name, known), known))


def snooze_duration(text: str) -> float:
    """Seconds to snooze for, in the one duration grammar of policies and the CLI (`1h30m`, `2d`)."""
    seconds = parse_duration(text)
    if seconds is None:
        raise BadInput(replies.bad_duration(text))
    if not 0 < seconds <= MAX_SNOOZE_S:
        raise BadInput(replies.snooze_out_of_range(text, MAX_SNOOZE_S))
    return seconds


def name_arg(text: str, usage: str) -> str:
    """A run, experiment, server or rule name as typed; BadInput with the command's usage if it is not one."""
    if not RUN_NAME_RE.match(text):
        raise BadInput(replies.refused(f"{text!r} is not a valid name. {usage}"))
    return text

"""Slash-command text in, a validated command out; pure, nothing runs here.

Refused before anything else: text that looks like a secret (never echoed back), text over 200
characters, control characters, and shell metacharacters (no command of the bot needs them;
refusing them keeps every name and reason inert wherever it later travels: tmux session names,
log paths, Slack messages).
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from trainwarden.bot import replies
from trainwarden.bot.errors import BadInput
from trainwarden.events.envelope import RUN_NAME_RE
from trainwarden.events.redact import looks_secret
from trainwarden.policies.durations import parse_duration

MAX_TEXT = 200
METACHARACTERS = frozenset(";&|`$<>\\(){}[]*?!~#'\"")
MAX_SNOOZE_S = 7 * 86400
DEFAULT_STOP_REASON = "stopped from Slack"
STATUS_ALL = "all"  # `/status all`: every run, ended ones too (so no run named `all` can be asked about)


@dataclass(frozen=True, slots=True)
class Status:
    run: str | None
    everything: bool = False  # `/status all`: ended runs too


FORCE = "--force"


@dataclass(frozen=True, slots=True)
class Launch:
    experiment: str
    server: str | None
    force: bool = False  # `--force`: launch although a plan holds it back (recorded in the launch)


@dataclass(frozen=True, slots=True)
class Stop:
    run: str
    reason: str


@dataclass(frozen=True, slots=True)
class Snooze:
    run: str
    rule: str | None
    seconds: float


Command = Status | Launch | Stop | Snooze


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


def _name(text: str, usage: str) -> str:
    if not RUN_NAME_RE.match(text):
        raise BadInput(replies.refused(f"{text!r} is not a valid name. {usage}"))
    return text


def parse(command: str, text: str) -> Command:
    """`command` without its slash ("stop"), `text` as Slack sent it."""
    check_text(text)
    words = text.split()
    usage = replies.usage(command)
    if command == "status" and words == [STATUS_ALL]:
        return Status(run=None, everything=True)
    if command == "status" and len(words) <= 1:
        return Status(run=_name(words[0], usage) if words else None)
    force = command == "launch" and FORCE in words
    if force:
        words = [w for w in words if w != FORCE]
    if command == "launch" and 1 <= len(words) <= 2:
        server = _name(words[1], usage) if len(words) == 2 else None
        return Launch(experiment=_name(words[0], usage), server=server, force=force)
    if command == "stop" and words:
        return Stop(run=_name(words[0], usage), reason=" ".join(words[1:]) or DEFAULT_STOP_REASON)
    if command == "snooze" and len(words) in (2, 3):
        rule = _name(words[1], usage) if len(words) == 3 else None
        return Snooze(run=_name(words[0], usage), rule=rule, seconds=snooze_duration(words[-1]))
    raise BadInput(usage)

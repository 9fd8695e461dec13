"""Slash-command text in, a validated command out; pure, nothing runs here.

One registry: the subcommands are `config.COMMANDS` (the allow-list names too). Slack's slash commands
are not namespaced, so the bot ships one command, `/tw SUBCOMMAND ...` (`NAMESPACE`); the old
top-level names (`/status`, `/stop`, ...) reach the same parser with the subcommand as the name.

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
from trainwarden.bot.config import COMMANDS, HELP, NAMESPACE
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


@dataclass(frozen=True, slots=True)
class Help:
    """`/tw help`: what each subcommand does."""


Command = Status | Launch | Stop | Snooze | Help


def split_namespaced(text: str) -> tuple[str, str]:
    """`/tw`'s text as (subcommand, the rest): ("stop", "exp01 lr too high"); a bare `/tw` is help."""
    head, _, rest = text.strip().partition(" ")
    return (head.lower() or HELP), rest.strip()


def allow_name(command: str, text: str) -> str:
    """The allow-list a slash command is checked against: `/tw stop ...` and `/stop ...` both `stop`;
    `/tw help` and an unknown `/tw` subcommand `help` (answered to anyone: they run nothing)."""
    name = split_namespaced(text)[0] if command == NAMESPACE else command
    return name if name in COMMANDS else HELP


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
    """`command` without its slash ("tw", or an old name like "stop"), `text` as Slack sent it."""
    check_text(text)
    if command == NAMESPACE:
        sub, rest = split_namespaced(text)
        if sub == HELP:
            return Help()
        if sub not in COMMANDS:
            raise BadInput(replies.unknown_subcommand(sub, closest(sub, (*COMMANDS, HELP))))
        return parse(sub, rest)
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

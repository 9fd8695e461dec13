"""The command line's parser: argparse, with "did you mean" for a misspelt command or option and each
command's description and examples from trainwarden/cli/help.py.

One class for every (sub)parser (argparse makes a subparser of its parent's class), so the help and the
suggestions are the same at every level: `trainwarden lauch`, `trainwarden policy chek`, `up --reds`.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

from trainwarden.cli import help as cli_help
from trainwarden.core.words import closest

MAX_WIDTH = 100  # columns of a description on a wide terminal (easier to read than a 200-column line)


def paragraph(text: str) -> str:
    """Pure: a description filled to the terminal's width, as argparse fills option help (the help is printed
    raw, so that the examples below keep their lines)."""
    width = min(shutil.get_terminal_size().columns - 2, MAX_WIDTH)
    return textwrap.fill(text, width=max(width, 40))


# Words other tools use for what a command here does: no spelling is close ("run" is nearest "runs", "help" "health")
SYNONYMS = {"run": "launch", "start": "up", "serve": "up", "status": "runs", "list": "runs", "ls": "runs",
            "ps": "runs", "kill": "stop", "logs": "replay", "history": "replay", "doctor": "health"}  # fmt: skip


def unknown_command(word: str, commands: Iterable[str], prog: str) -> str:
    """Pure: the error for a command that does not exist, with the one that was probably meant."""
    names = list(commands)
    synonym = SYNONYMS.get(word.lower())
    meant = synonym if synonym in names else None if word.lower() == "help" else closest(word, names)
    if meant is not None:
        return f"unknown command {word!r}; did you mean {meant!r}?"
    return f"unknown command {word!r}; `{prog} --help` lists the commands"


def invalid_choice(value: str, choices: Iterable[str]) -> str:
    """Pure: the error for an option value outside its choices, with the nearest one."""
    names = [str(c) for c in choices]
    meant = closest(value, names)
    hint = f"; did you mean {meant!r}?" if meant is not None else ""
    return f"invalid choice {value!r} (choose from {', '.join(map(repr, names))}){hint}"


def unrecognized(words: Sequence[str], options: Iterable[str]) -> str:
    """Pure: the error for arguments no option takes; for each that looks like a misspelt option, the option."""
    known = [o for o in options if o.startswith("--")]
    typed = [w.partition("=")[0] for w in words if w.startswith("--")]
    hints = []
    for word in typed:
        if (meant := closest(word, known)) is not None:
            hints.append(f"did you mean {meant}?" if len(typed) == 1 else f"{word}: did you mean {meant}?")
    return "; ".join([f"unrecognized arguments: {shlex.join(words)}", *hints])


class Parser(argparse.ArgumentParser):
    """argparse with suggestions. `extras_allowed`: the caller handles arguments no option takes (the top
    level, which passes `launch`'s words on to it); any other subcommand refuses them with its own usage."""

    def __init__(self, *args: Any, extras_allowed: bool = False, **kwargs: Any) -> None:
        prog = kwargs.get("prog")
        command = prog.partition(" ")[2] if isinstance(prog, str) else ""
        if (said := cli_help.HELP.get(command)) is not None:
            kwargs.setdefault("description", paragraph(said.description))
            kwargs.setdefault("epilog", cli_help.examples(said.examples))
            kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self.extras_allowed = extras_allowed

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        if isinstance(action, argparse._SubParsersAction):
            raise argparse.ArgumentError(None, unknown_command(str(value), action.choices, self.prog))
        raise argparse.ArgumentError(action, invalid_choice(str(value), action.choices))

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and not self.extras_allowed:
            self.error(unrecognized(extras, self._option_string_actions))  # with this subcommand's usage
        return parsed, extras

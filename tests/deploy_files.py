"""Reading the shipped deployment files as their tools would, for the tests under tests/*/test_deploy_*.py:
the Dockerfile's instructions (continuation lines joined), the compose file (YAML anchors and merge keys,
which compose reads too), and whether an argv is one `trainwarden` accepts (its real parser)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO
from trainwarden.cli.entry import build_parser

DEPLOY = REPO / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
# ${VAR}, ${VAR:-default}, ${VAR-default}: compose's interpolation, nested defaults included
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)((?:[^{}]|\{[^{}]*\})*))?\}")


@dataclass(frozen=True)
class Instruction:
    word: str  # FROM, RUN, COPY, ... (upper case)
    args: str  # the rest of the instruction, continuation lines joined


def dockerfile(path: Path = DOCKERFILE) -> list[Instruction]:
    """The Dockerfile's instructions in order (comments dropped, `\\`-continued lines joined)."""
    out: list[Instruction] = []
    pending = ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        pending += " " + stripped.removesuffix("\\").strip()
        if not stripped.endswith("\\"):
            word, _, rest = pending.strip().partition(" ")
            out.append(Instruction(word.upper(), rest.strip()))
            pending = ""
    return out


def compose(path: Path = COMPOSE) -> dict[str, Any]:
    return dict(yaml.safe_load(path.read_text()))


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's `${VAR}`/`${VAR:-default}` substitution, innermost first (a default may hold another)."""
    while True:
        match = INTERPOLATION.search(text)
        if match is None:
            return text
        name, op, default = match.groups()
        value = env.get(name)
        if value is None or (op == ":-" and value == ""):
            value = default if op else ""
        text = text[: match.start()] + interpolate(value, env) + text[match.end() :]


def variables(text: str) -> list[tuple[str, str | None]]:
    """Each `${VAR...}` in the text, with its default (None: it has none)."""
    return [(m.group(1), m.group(3) if m.group(2) else None) for m in INTERPOLATION.finditer(text)]


def trainwarden_accepts(argv: list[str]) -> bool:
    """Whether the real `trainwarden` parser takes this argv (it exits 2 on an unknown subcommand or option)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code == 0
    return True


def exec_form(args: str) -> list[str]:
    """A JSON-array (exec form) instruction argument, or a shell-form one split as a shell would."""
    text = args.strip()
    return list(yaml.safe_load(text)) if text.startswith("[") else shlex.split(text)

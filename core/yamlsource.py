"""A YAML file as trainwarden reads it: text, node tree with positions, and the problems found in it.

The parts every parser shares beside `Reader` (core/yamlfile.py): reading and composing a file (a syntax error or
a file too large to be ours stops there), `file:line:column` positions, problems collected in one pass and reported
in file order, and the one did-you-mean of a config file (core/words.py `closest`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from trainwarden.core.errors import TrainwardenError, YamlFileError
from trainwarden.core.words import closest


def plain(node: yaml.Node) -> Any:
    """A node's Python value (safe tags only)."""
    return yaml.safe_load(yaml.serialize(node))


def empty_mapping() -> yaml.MappingNode:
    """Stands in for an absent section, so that a parser reads it like any other (and finds defaults)."""
    return yaml.MappingNode("tag:yaml.org,2002:map", [])


def where(source: str, node: yaml.Node | None) -> str:
    if node is None or node.start_mark is None:  # a stand-in node (an absent section) has no position
        return source
    return f"{source}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"


def read_text(path: Path) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise YamlFileError(f"{path}: cannot read: {exc.strerror}") from None


MAX_YAML_CHARS = 1_000_000  # a settings, policy, servers or manifest file is a few KB; parsing 50 MB takes minutes


def compose(text: str, source: str) -> yaml.Node | None:
    """The node tree with positions; a syntax error stops here (nothing after it can be trusted), and so
    does a file too large to be one of ours (PyYAML would parse it for minutes, saying nothing)."""
    if len(text) > MAX_YAML_CHARS:
        raise YamlFileError(f"{source}: {len(text):,} characters, over the {MAX_YAML_CHARS:,} a trainwarden YAML "
                            "file may have: is it the right file?")  # fmt: skip
    try:
        return yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise YamlFileError(f"{at}: not valid YAML: {getattr(exc, 'problem', exc)}") from None


_POSITION = re.compile(r"^(.*?):(\d+):(\d+): ")


def in_file_order(problems: Sequence[str]) -> list[str]:
    """Problems sorted by file, line and column (they are found section by section, not top to bottom);
    any without a position keep their order, after the others."""

    def key(problem: str) -> tuple[int, str, int, int]:
        m = _POSITION.match(problem)
        return (0, m[1], int(m[2]), int(m[3])) if m else (1, "", 0, 0)

    return sorted(problems, key=key)


def did_you_mean(word: str, choices: Collection[str]) -> str:
    """'; did you mean 'x'?' for the closest of `choices`, or '' when none is close."""
    close = closest(word, choices)
    return f"; did you mean '{close}'?" if close else ""


def report(problems: Sequence[str]) -> str:
    """One message for several problems; a single one stays on one line."""
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems:\n" + "\n".join(f"  {p}" for p in problems)


@dataclass(slots=True)
class Context:
    """The problems found so far in one file (several files may share one `problems` list)."""

    source: str
    problems: list[str] = field(default_factory=list)
    noun: str = "key"  # what the file's keys are called in messages ("field" in policies)
    probe: bool = False  # generating a schema: visit every section and list once, problems do not matter

    def where(self, node: yaml.Node | None) -> str:
        return where(self.source, node)

    def problem(self, node: yaml.Node | None, message: str) -> None:
        self.problems.append(f"{self.where(node)}: {message}")

    def check(self, error: type[TrainwardenError] = YamlFileError) -> None:
        """Raise `error` listing every problem, if there is one; its `problems` attribute holds them."""
        if self.problems:
            self.problems[:] = in_file_order(self.problems)
            exc = error(report(self.problems))
            exc.problems = list(self.problems)  # type: ignore[attr-defined]  # read by callers that list them
            raise exc

"""The slash-command list of slack/manifest.yaml, generated from the command registry (bot/commands.py).

`python -m trainwarden.bot.manifest` prints the `slash_commands:` block; with `--write slack/manifest.yaml`
it replaces that block in the file. tests/unit/test_slack_manifest.py checks the committed file holds
exactly what this prints, so a new command cannot be served without being declared to Slack.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trainwarden.bot.commands import COMMANDS, REGISTRY, named
from trainwarden.bot.http_server import PATH
from trainwarden.ops.status_messages import NAMESPACE

EXAMPLE_URL = f"https://trainwarden.example.org{PATH}"  # replaced by the bot's public URL in HTTP mode
BLOCK_START = "  slash_commands:"


def slash_commands() -> str:
    """The `slash_commands:` block: `/tw` with every subcommand, and the old top-level names as comments."""
    names = ", ".join(c.name for c in REGISTRY)
    hint = " | ".join(f"{name} {named(name).args}" for name in COMMANDS)
    lines = [
        BLOCK_START,
        f"    - command: /{NAMESPACE}",
        f"      url: {EXAMPLE_URL}",
        f"      description: {json.dumps(f'Training runs: {names}')}",
        f"      usage_hint: {json.dumps(hint)}",
        "      should_escape: false",
        "    # The old top-level names still work (the bot answers them as /tw's subcommands). To keep them in a",
        "    # workspace where nothing else owns them, add these entries to the list above:",
    ]
    for name in COMMANDS:
        c = named(name)
        lines.append(f"    # - {{command: /{name}, url: {EXAMPLE_URL}, description: {json.dumps(c.summary)}, "
                     f"usage_hint: {json.dumps(c.args)}, should_escape: false}}")  # fmt: skip
    return "\n".join(lines) + "\n"


def block_of(manifest: str) -> str:
    """The `slash_commands:` block of a manifest's text: its line and the lines indented below it."""
    lines = manifest.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip("\n") == BLOCK_START)
    end = start + 1
    while end < len(lines) and lines[end].startswith("    "):
        end += 1
    return "".join(lines[start:end])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, metavar="MANIFEST", help="replace the block in this manifest file")
    args = parser.parse_args(argv)
    if args.write is None:
        print(slash_commands(), end="")
        return
    text = args.write.read_text()
    args.write.write_text(text.replace(block_of(text), slash_commands(), 1))


if __name__ == "__main__":
    main()

"""The command line helps: every command's --help says what it is for and shows an example, and a misspelt
command or option is answered with the one that was meant (trainwarden/cli/parser.py, cli_help.py)."""

from __future__ import annotations

import argparse
import shlex
import subprocess

import pytest
from trainwarden.core.words import closest

from tests.conftest import REPO
from trainwarden.cli import help as cli_help
from trainwarden.cli.entry import build_parser, main
from trainwarden.cli.launch import split_command
from trainwarden.cli.parser import unknown_command, unrecognized


def commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command's words and parser, nested ones too (an alias names the same parser once)."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                out.append((" ".join((*words, name)), child))
                out += commands(child, (*words, name))
    return out


ALL = commands(build_parser())


def test_the_walk_finds_the_nested_commands_too():
    names = [name for name, _ in ALL]
    assert {"launch", "up", "runs", "policy", "policy check", "policy report"} <= set(names)
    assert len(names) >= 27


@pytest.mark.parametrize(("name", "parser"), ALL, ids=[name for name, _ in ALL])
def test_every_command_has_a_description_and_an_example(name, parser):
    text = parser.format_help()
    assert parser.description, f"`trainwarden {name} --help` has no description: add it to trainwarden/cli/help.py"
    assert len(parser.description.split()) >= 10, parser.description  # a paragraph, not a title
    examples = text.partition("\nExamples:\n")[2]
    assert examples, f"`trainwarden {name} --help` shows no example: add one to trainwarden/cli/help.py"
    assert all(line.strip().startswith(("trainwarden ", "REDIS_URL=", "SLACK_BOT_TOKEN="))
               for line in examples.splitlines()), examples  # fmt: skip
    assert f"trainwarden {name}" in examples, examples  # the command's own examples


def test_the_catalogue_names_only_commands_that_exist():
    assert set(cli_help.HELP) == {"", *(name for name, _ in ALL)}


def test_the_top_level_help_has_examples(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "Examples:\n  trainwarden demo" in capsys.readouterr().out


def test_the_top_level_help_opens_with_what_the_tool_does(capsys):
    """Not with the module's docstring (`main` (the console script, re-exported by cli/__init__.py)...)."""
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    first = out.partition("\n\n")[2].partition("\n\n")[0]  # the paragraph after the usage
    assert first.startswith("trainwarden watches ML training runs"), out
    assert "cli/__init__" not in out and "console script" not in out


@pytest.mark.parametrize(
    ("word", "candidates", "meant"),
    [
        ("lauch", ["launch", "up", "runs"], "launch"),
        ("--reds", ["--redis", "--redis-url", "--logs"], "--redis"),
        ("debg", ["DEBUG", "INFO"], "DEBUG"),  # in any case
        ("xyz", ["launch", "up", "runs"], None),  # nothing close: no guess
    ],
)
def test_closest(word, candidates, meant):
    assert closest(word, candidates) == meant


def test_messages():
    said = "unknown command 'lauch'; did you mean 'launch'?"
    assert unknown_command("lauch", ["launch", "up"], "trainwarden") == said
    said = "unknown command 'xyz'; `trainwarden --help` lists the commands"
    assert unknown_command("xyz", ["launch"], "trainwarden") == said
    said = "unknown command 'help'; `trainwarden --help` lists the commands"  # not "did you mean 'health'?"
    assert unknown_command("help", ["health", "launch"], "trainwarden") == said
    assert unknown_command("run", ["runs", "launch"], "trainwarden") == "unknown command 'run'; did you mean 'launch'?"
    assert unknown_command("start", ["up"], "trainwarden") == "unknown command 'start'; did you mean 'up'?"
    assert unknown_command("start", ["check"], "trainwarden policy").endswith("lists the commands")  # not there
    assert unrecognized(["--reds"], ["--redis", "-h"]) == "unrecognized arguments: --reds; did you mean --redis?"
    assert unrecognized(["--reds", "--lgos", "x y"], ["--redis", "--logs"]) == (
        "unrecognized arguments: --reds --lgos 'x y'; --reds: did you mean --redis?; --lgos: did you mean --logs?"
    )
    assert unrecognized(["--zzzzzz"], ["--redis"]) == "unrecognized arguments: --zzzzzz"


def test_a_misspelt_command_is_named_with_the_one_meant(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["lauch", "exp01"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "trainwarden: error: unknown command 'lauch'; did you mean 'launch'?"


def test_a_misspelt_subcommand_of_a_command(capsys):
    with pytest.raises(SystemExit):
        main(["policy", "chek", "p.yaml"])
    assert "trainwarden policy: error: unknown command 'chek'; did you mean 'check'?" in capsys.readouterr().err


def test_a_misspelt_option_shows_the_commands_usage_and_the_option_meant(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["up", "--reds"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: trainwarden up ")  # up's usage, not the top level's
    assert err.splitlines()[-1] == "trainwarden up: error: unrecognized arguments: --reds; did you mean --redis?"


def test_a_misspelt_option_value_names_the_choice_meant(capsys):
    with pytest.raises(SystemExit):
        main(["schema", "polcy"])
    assert "did you mean 'policy'?" in capsys.readouterr().err


@pytest.mark.parametrize("typo", [["--chek-s", "1"], ["--workdr", "/tmp"]])
def test_a_misspelt_launch_option_is_named_too_and_exits_2_like_every_usage_error(tmp_path, capsys, typo):
    settings = tmp_path / "tw.yaml"
    settings.write_text("redis_url: redis://127.0.0.1:1/0\n")  # never reached
    with pytest.raises(SystemExit) as exited:
        main(["launch", "exp01", "--config", str(settings), *typo, "--", "python", "train.py"])
    assert exited.value.code == 2  # as `up --reds` (argparse's status for a usage error), not 1
    err = capsys.readouterr().err
    assert err.startswith("usage: trainwarden launch ")  # launch's usage
    meant = {"--chek-s": "--check-s", "--workdr": "--workdir"}[typo[0]]
    assert f"unrecognized arguments: {shlex.join(typo)}; did you mean {meant}?" in err


@pytest.mark.parametrize(("word", "said"), [("demoo", "dev.sh: unknown command 'demoo'; did you mean 'demo'?"),
                                            ("xyz", "dev.sh: unknown command 'xyz'")])  # fmt: skip
def test_dev_sh_names_an_unknown_command(word, said):
    proc = subprocess.run([str(REPO / "dev.sh"), word], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == said
    assert "./dev.sh demo" in proc.stderr and "set -euo" not in proc.stderr  # the usage: the header comment alone


EXAMPLES = [line for said in cli_help.HELP.values() for line in said.examples]


@pytest.mark.parametrize("line", EXAMPLES)
def test_every_example_parses(line):
    """An example a user copies is a command line the parser takes (shell parts aside: VAR=value, > FILE, #)."""
    words = shlex.split(line.partition(" # ")[0].partition(" > ")[0])
    words = words[words.index("trainwarden") :]  # after any VAR=value
    assert line.startswith("trainwarden") or all("=" in w for w in line.split("trainwarden ")[0].split()), line
    options, _training_command = split_command(words[1:])  # `launch ... -- COMMAND`: as cli.main splits it
    assert build_parser().parse_args(options).func is not None  # argparse exits 2 on what it does not take

"""The command registry (bot/commands.py): one object per command, each found again by name and by the
request it parsed; the allow-list is the command's unless it runs nothing."""

import pytest
from trainwarden.bot.commands import COMMANDS, REGISTRY, command_for, help_text, named, parse
from trainwarden.bot.config import HELP, Allow, BotConfig
from trainwarden.bot.errors import BadInput

TEXTS = {"status": "exp01", "launch": "demo gpu1 --force", "stop": "exp01 lr", "snooze": "exp01 1h", HELP: ""}


def test_names_and_request_types_are_unique_and_every_command_is_listed_in_help():
    assert len({c.name for c in REGISTRY}) == len({c.request for c in REGISTRY}) == len(REGISTRY)
    assert tuple(c.name for c in REGISTRY if c.name != HELP) == COMMANDS
    assert all(f"`/tw {c.name}" in help_text() for c in REGISTRY)


@pytest.mark.parametrize("name", [c.name for c in REGISTRY])
def test_a_parsed_request_finds_the_command_that_parsed_it(name):
    request = parse("tw", f"{name} {TEXTS[name]}")
    assert isinstance(request, named(name).request) and command_for(request) is named(name)


@pytest.mark.parametrize("name", COMMANDS)
def test_a_command_runs_only_for_its_allow_list_and_help_for_anyone(name):
    config = BotConfig(allow={name: Allow(users=frozenset({"U1"}), channels=frozenset({"C1"}))})
    assert named(name).authorize(user="U1", channel="C1", config=config)
    assert not named(name).authorize(user="U1", channel="C2", config=config)
    assert not named(name).authorize(user="U2", channel="C1", config=config)
    others = [c for c in COMMANDS if c != name]
    assert not any(named(c).authorize(user="U1", channel="C1", config=config) for c in others)
    assert named(HELP).authorize(user="U2", channel=None, config=BotConfig())


@pytest.mark.parametrize(("name", "text"), [("status", "a b"), ("launch", ""), ("stop", ""), ("snooze", "exp01")])
def test_a_commands_usage_error_is_its_declaration(name, text):
    command = named(name)
    with pytest.raises(BadInput) as exc:
        parse(name, text)
    assert str(exc.value) == f"Usage: /tw {name} {command.args} ({command.what})" == command.usage

"""slack/manifest.yaml, the app a new user creates, matches what the bot serves."""

import re
from urllib.parse import urlparse

import yaml
from trainwarden.bot.blocks import SHORTCUT_RUN_ACTIONS
from trainwarden.bot.commands import COMMANDS
from trainwarden.bot.http_server import PATH
from trainwarden.bot.manifest import block_of, slash_commands
from trainwarden.bot.slash.status import STATUS_ALL
from trainwarden.ops.status_messages import NAMESPACE

from tests.conftest import REPO

MANIFEST = REPO / "slack" / "manifest.yaml"


def test_the_manifest_declares_the_bots_commands_scopes_and_endpoint():
    manifest = yaml.safe_load(MANIFEST.read_text())
    commands = manifest["features"]["slash_commands"]
    assert [c["command"] for c in commands] == [f"/{NAMESPACE}"]  # one namespaced command, nothing to collide
    assert all(name in commands[0]["usage_hint"] for name in COMMANDS)
    shortcuts = manifest["features"]["shortcuts"]
    assert shortcuts == [{"name": "Run actions", "type": "message", "callback_id": SHORTCUT_RUN_ACTIONS,
                          "description": shortcuts[0]["description"]}]  # fmt: skip
    assert len(shortcuts[0]["name"]) <= 24 and len(shortcuts[0]["description"]) <= 150  # Slack's limits
    urls = [c["url"] for c in commands] + [manifest["settings"]["interactivity"]["request_url"]]
    assert {urlparse(url).path for url in urls} == {PATH}
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    # posts and thread replies, slash commands, reconciliation by metadata (public and private), charts
    wanted = {"chat:write", "commands", "channels:history", "groups:history", "files:write"}
    assert wanted <= set(manifest["oauth_config"]["scopes"]["bot"])
    assert manifest["settings"]["socket_mode_enabled"] is True  # the documented default: no public endpoint


def test_the_old_command_names_in_the_manifests_comments_are_valid_entries_for_every_command():
    """Uncommented, the documented entries for the old names are slash commands the bot answers."""
    text = MANIFEST.read_text()
    old = [yaml.safe_load(m)[0] for m in re.findall(r"^ *# (- \{command: .*\})$", text, flags=re.M)]
    assert [c["command"] for c in old] == [f"/{name}" for name in COMMANDS]
    assert all(urlparse(c["url"]).path == PATH and c["description"] and "should_escape" in c for c in old)


def test_the_manifests_command_list_is_the_one_the_registry_generates():
    """A command added to bot/commands.py's registry is declared to Slack: regenerate with
    `python -m trainwarden.bot.manifest --write slack/manifest.yaml`."""
    assert block_of(MANIFEST.read_text()) == slash_commands()
    assert f"{STATUS_ALL}" in slash_commands() and all(f"/{name}," in slash_commands() for name in COMMANDS)

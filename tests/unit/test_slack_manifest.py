"""slack/manifest.yaml, the app a new user creates, matches what the bot serves."""

from urllib.parse import urlparse

import yaml
from trainwarden.bot.config import COMMANDS
from trainwarden.bot.http_server import PATH

from tests.conftest import REPO


def test_the_manifest_declares_the_bots_commands_scopes_and_endpoint():
    manifest = yaml.safe_load((REPO / "slack" / "manifest.yaml").read_text())
    commands = manifest["features"]["slash_commands"]
    assert sorted(c["command"] for c in commands) == sorted(f"/{name}" for name in COMMANDS)
    urls = [c["url"] for c in commands] + [manifest["settings"]["interactivity"]["request_url"]]
    assert {urlparse(url).path for url in urls} == {PATH}
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    # posts and thread replies, slash commands, reconciliation by metadata (public and private), charts
    wanted = {"chat:write", "commands", "channels:history", "groups:history", "files:write"}
    assert wanted <= set(manifest["oauth_config"]["scopes"]["bot"])
    assert manifest["settings"]["socket_mode_enabled"] is True  # the documented default: no public endpoint

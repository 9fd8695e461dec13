"""The `mcp:` settings section (actions off unless allowed; errors at file:line:column), the caller an MCP call is
recorded as, and how Slack names an agent that launched a run. Pure: no server, no Redis."""

import pytest
from trainwarden.bot.messages import notification_text
from trainwarden.core.errors import ConfigError
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event

from trainwarden.mcp_server.actions import caller
from trainwarden.settings import parse_settings


@pytest.mark.parametrize(
    ("text", "allowed", "identity"),
    [
        ("redis_url: x\n", set(), None),  # no section: reads only
        ("mcp: {}\n", set(), None),
        ("mcp:\n  allow_actions: false\n", set(), None),
        ("mcp:\n  allow_actions: true\n", {"stop", "launch"}, None),
        ("mcp:\n  allow_actions: [stop]\n  identity: research-agent\n", {"stop"}, "research-agent"),
        ("mcp:\n  allow_actions: []\n", set(), None),
    ],
)
def test_actions_are_off_unless_the_section_allows_them(tmp_path, text, allowed, identity):
    settings = parse_settings(text, tmp_path / "tw.yaml", env={})
    assert settings.mcp.allow_actions == allowed
    assert settings.mcp.identity == identity
    assert all(settings.mcp.allows(action) == (action in allowed) for action in ("stop", "launch"))


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("mcp:\n  allow_actions: [stop, snooze]\n", "tw.yaml:2:18", "must be true, false or a list of stop, launch"),
        ("mcp:\n  allow_actions: yes please\n", "tw.yaml:2:18", "must be true, false or a list of stop, launch"),
        ("mcp:\n  identity: 'research agent'\n", "tw.yaml:2:13", "mcp.identity 'research agent' is not a valid"),
        ("mcp:\n  allow: [stop]\n", "tw.yaml:2:3", "unknown key 'allow'"),
        ("mcp: [stop]\n", "tw.yaml:1:6", "must be a mapping"),
    ],
)
def test_a_bad_section_names_file_line_and_column(tmp_path, text, where, message):
    with pytest.raises(ConfigError) as info:
        parse_settings(text, tmp_path / "tw.yaml", env={})
    assert where in str(info.value) and message in str(info.value)


@pytest.mark.parametrize(
    ("identity", "client", "expected"),
    [
        ("research-agent", "claude-code", "mcp:research-agent"),  # the operator's word wins over the client's claim
        (None, "claude-code", "mcp:claude-code"),
        (None, "Claude Desktop", "mcp:Claude-Desktop"),
        (None, "<@U0ADMIN> `rm -rf`", "mcp:U0ADMIN-rm--rf"),  # nothing of Slack's or a shell's syntax survives
        (None, "", "mcp:unknown"),
        (None, None, "mcp:unknown"),
        (None, "x" * 100, "mcp:" + "x" * 64),
    ],
)
def test_the_caller_is_the_configured_identity_else_the_clients_name_made_safe(identity, client, expected):
    assert caller(identity, client) == expected


def test_slack_says_an_agents_launch_without_a_broken_mention():
    def launched(by):
        data = {"server": "gpu1", "gpus": [0], "session": "train-exp01", "log_path": "/l", "requested_by": by}
        return notification_text(make_event(t.RUN_LAUNCHED, run="exp01", host="ctl", producer="p", seq=1, data=data))

    assert "LAUNCHED exp01@gpu1 by mcp:research-agent:" in launched("mcp:research-agent")
    assert "by <@U0123ABCD>:" in launched("U0123ABCD")  # a Slack user is still mentioned

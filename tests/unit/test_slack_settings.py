"""The `slack:` section: parsed into BotConfig, errors with file:line:column (one case per bad file)."""

import pytest
from trainwarden.core.errors import ConfigError

from trainwarden.settings import parse_settings

GOOD = """\
slack:
  channel: C0123
  allow:
    status: {users: [U1, U2]}
    stop: {users: [U1], channels: [C0123]}
  rate_per_s: 2
  flap_threshold: 5
"""


def test_good_slack_section(tmp_path):
    cfg = parse_settings(GOOD, tmp_path / "tw.yaml", env={}).slack
    assert cfg.channel == "C0123"
    assert cfg.allows("status", user="U2", channel="Cany")
    assert cfg.allows("stop", user="U1", channel="C0123")
    assert not cfg.allows("stop", user="U1", channel="Cother")
    assert not cfg.allows("launch", user="U1", channel="C0123")
    assert cfg.rate_per_s == 2.0 and cfg.flap_threshold == 5


def test_no_slack_section_means_console_defaults(tmp_path):
    cfg = parse_settings("host: a\n", tmp_path / "tw.yaml", env={}).slack
    assert cfg.channel is None and cfg.allow == {}


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("slack:\n  chanel: C1\n", "tw.yaml:2:3", "unknown key 'chanel' in slack"),
        ("slack:\n  allow:\n    deploy: {users: [U1]}\n", "tw.yaml:3:5", "unknown key 'deploy' in slack.allow"),
        ("slack:\n  allow:\n    stop: {channels: [C1]}\n", "tw.yaml:3:11", "needs a 'users' list"),
        ("slack:\n  allow:\n    stop: {users: U1}\n", "tw.yaml:3:19", "must be a list of Slack ids"),
        ("slack:\n  rate_per_s: 0\n", "tw.yaml:2:15", "must be positive"),
        ("slack:\n  flap_threshold: many\n", "tw.yaml:2:19", "must be an integer"),
        ("slack:\n  experiments: exps.yaml\n", "tw.yaml:2:3", "unknown key 'experiments' in slack"),
    ],
)  # fmt: skip
def test_errors_name_file_line_and_column(tmp_path, text, where, message):
    with pytest.raises(ConfigError) as info:
        parse_settings(text, tmp_path / "tw.yaml", env={})
    assert where in str(info.value)
    assert message in str(info.value)

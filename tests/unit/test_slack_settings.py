"""The `slack:` section: parsed into BotConfig, errors with file:line:column (one case per bad file)."""

import pytest

from trainwarden.errors import ConfigError
from trainwarden.settings import parse_settings

GOOD = """\
slack:
  channel: C0123
  allow:
    status: {users: [U1, U2]}
    stop: {users: [U1], channels: [C0123]}
  rate_per_s: 2
  flap_threshold: 5
  experiments:
    - name: exp01
      command: [python, train.py, --lr, "3e-4"]
      workdir: proj
      total_steps: 1000
"""


def test_good_slack_section(tmp_path):
    cfg = parse_settings(GOOD, tmp_path / "tw.yaml", env={}).slack
    assert cfg.channel == "C0123"
    assert cfg.allows("status", user="U2", channel="Cany")
    assert cfg.allows("stop", user="U1", channel="C0123")
    assert not cfg.allows("stop", user="U1", channel="Cother")
    assert not cfg.allows("launch", user="U1", channel="C0123")
    assert cfg.rate_per_s == 2.0 and cfg.flap_threshold == 5
    (exp,) = cfg.experiments
    assert exp.command == ("python", "train.py", "--lr", "3e-4")
    assert exp.workdir == (tmp_path / "proj").resolve() and exp.total_steps == 1000


def test_experiments_from_their_own_file(tmp_path):
    (tmp_path / "exps.yaml").write_text("- {name: e1, command: [python], workdir: .}\n")
    cfg = parse_settings("slack:\n  experiments: exps.yaml\n", tmp_path / "tw.yaml", env={}).slack
    assert [e.name for e in cfg.experiments] == ["e1"]


def test_no_slack_section_means_console_defaults(tmp_path):
    cfg = parse_settings("host: a\n", tmp_path / "tw.yaml", env={}).slack
    assert cfg.channel is None and cfg.allow == {} and cfg.experiments == ()


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("slack:\n  chanel: C1\n", "tw.yaml:2:3", "unknown key 'chanel' in slack"),
        ("slack:\n  allow:\n    deploy: {users: [U1]}\n", "tw.yaml:3:5", "unknown key 'deploy' in slack.allow"),
        ("slack:\n  allow:\n    stop: {channels: [C1]}\n", "tw.yaml:3:11", "needs a 'users' list"),
        ("slack:\n  allow:\n    stop: {users: U1}\n", "tw.yaml:3:19", "must be a list of Slack ids"),
        ("slack:\n  rate_per_s: 0\n", "tw.yaml:2:15", "must be positive"),
        ("slack:\n  flap_threshold: many\n", "tw.yaml:2:19", "must be a int"),
        ("slack:\n  experiments:\n    - {name: e1, workdir: .}\n", "tw.yaml:3:7", "needs 'name', 'command'"),
        ("slack:\n  experiments:\n    - {name: 'a b', command: [x], workdir: .}\n", "tw.yaml:3:14",
         "must be a valid run name"),
        ("slack:\n  experiments:\n    - {name: e1, command: x, workdir: .}\n", "tw.yaml:3:27", "argv list"),
        ("slack:\n  experiments:\n    - {name: e1, command: [x], workdir: .}\n    - {name: e1, command: [x], "
         "workdir: .}\n", "tw.yaml:4:7", "listed twice"),
        ("slack:\n  experiments: nope.yaml\n", "tw.yaml:2:16", "cannot read experiments file"),
    ],
)  # fmt: skip
def test_errors_name_file_line_and_column(tmp_path, text, where, message):
    with pytest.raises(ConfigError) as info:
        parse_settings(text, tmp_path / "tw.yaml", env={})
    assert where in str(info.value)
    assert message in str(info.value)

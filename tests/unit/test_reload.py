"""The pure parts of SIGHUP reloads: one line per refusal, and which settings a reload puts in force."""

from trainwarden.bot.config import BotConfig, Route
from trainwarden.bot.reconfigure import differences

from trainwarden.reload import changed, one_line
from trainwarden.settings import Settings


def test_one_line_keeps_the_first_problem_and_counts_the_others():
    many = "2 problems:\n  /etc/tw.yaml:4:7: a slack.routes entry needs a 'channel'\n  /etc/tw.yaml:5:17: ..."
    assert one_line(many) == "/etc/tw.yaml:4:7: a slack.routes entry needs a 'channel' (and 1 more)"
    assert one_line("/etc/tw.yaml:4:1: not valid YAML:\n   expected   a node") == (
        "/etc/tw.yaml:4:1: not valid YAML: expected a node"
    )
    assert one_line("") == "(no detail)"


def test_changed_settings_leave_out_what_the_daemon_reloads():
    old = Settings(host="a")
    new = Settings(host="b", slack=BotConfig(channel="C2"))
    assert changed(old, new) == ["host", "slack"]
    assert changed(old, new, live=("slack",)) == ["host"]


def test_routes_and_allow_lists_are_live_the_http_port_is_not():
    old = BotConfig(channel="C1")
    new = BotConfig(channel="C1", routes=(Route(run=("exp*",), channel="C2"),), http_port=3001)
    assert differences(old, new) == (["slack.routes"], ["slack.http_port"])

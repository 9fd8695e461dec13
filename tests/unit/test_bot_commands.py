import pytest
from trainwarden.bot.commands import Launch, Snooze, Status, Stop, check_text, parse, snooze_duration
from trainwarden.bot.config import Allow, BotConfig
from trainwarden.bot.errors import BadInput


@pytest.mark.parametrize(
    ("command", "text", "expected"),
    [
        ("status", "", Status(run=None)),
        ("status", "exp01", Status(run="exp01")),
        ("status", "all", Status(run=None, everything=True)),
        ("launch", "exp01", Launch(experiment="exp01", server=None)),
        ("launch", "exp01 gpu2", Launch(experiment="exp01", server="gpu2")),
        ("launch", "exp01 --force", Launch(experiment="exp01", server=None, force=True)),
        ("launch", "--force exp01 gpu2", Launch(experiment="exp01", server="gpu2", force=True)),
        ("stop", "exp01", Stop(run="exp01", reason="stopped from Slack")),
        ("stop", "exp01  lr too high, see wandb", Stop(run="exp01", reason="lr too high, see wandb")),
        ("snooze", "exp01 2h", Snooze(run="exp01", rule=None, seconds=7200)),
        ("snooze", "exp01 loss-spike 30m", Snooze(run="exp01", rule="loss-spike", seconds=1800)),
        ("snooze", "exp01 1h30m", Snooze(run="exp01", rule=None, seconds=5400)),
        ("snooze", "exp01 loss-spike 1d12h", Snooze(run="exp01", rule="loss-spike", seconds=129600)),
    ],
)
def test_parse(command, text, expected):
    assert parse(command, text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("exp01; rm -rf /", "characters ;"),
        ("exp01 | cat", "characters |"),
        ("$(id)", "characters $ ( )"),
        ("`id`", "characters `"),
        ("exp01 > /etc/passwd", "characters >"),
        ("see W&B", "characters &"),
        ("exp01 don't", "characters '"),
        ("exp01\nsecond line", "control characters"),
        ("exp01\u202egnp.exe", "control characters"),
        ("x" * 201, "201 characters long; the limit is 200"),
    ],
)
def test_dangerous_text_is_refused_with_the_reason(text, reason):
    with pytest.raises(BadInput, match="Refused, nothing was run") as exc:
        check_text(text)
    assert reason in str(exc.value)


@pytest.mark.parametrize(("command", "text"), [("launch", ""), ("launch", "a b c"), ("stop", ""), ("snooze", "exp01"),
                                               ("status", "a b"), ("launch", "../etc")])  # fmt: skip
def test_wrong_shapes_get_usage_or_refusal(command, text):
    with pytest.raises(BadInput):
        parse(command, text)


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("5m", 300), ("1.5h", 5400), ("7d", 604800)])
def test_durations(text, seconds):
    assert snooze_duration(text) == seconds


@pytest.mark.parametrize("text", ["5", "5x", "0m", "8d", "-1h", "m"])
def test_bad_durations(text):
    with pytest.raises(BadInput, match="not a duration"):
        snooze_duration(text)


def test_allow_lists_per_command_and_channel():
    config = BotConfig(allow={"stop": Allow(users=frozenset({"U1"}), channels=frozenset({"C1"})),
                              "status": Allow(users=frozenset({"U1", "U2"}))})  # fmt: skip
    assert config.allows("stop", user="U1", channel="C1")
    assert not config.allows("stop", user="U1", channel="C2")
    assert not config.allows("stop", user="U2", channel="C1")
    assert config.allows("status", user="U2", channel="anything")
    assert not config.allows("launch", user="U1", channel="C1")  # not configured: nobody

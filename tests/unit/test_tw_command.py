"""`/tw SUBCOMMAND`: one parser for the namespaced command and the old names, help, did-you-mean; the
allow-list a request is checked against; /status's loss column when the loss is NaN."""

import math

import pytest
from trainwarden.bot.authz import identify
from trainwarden.bot.commands import (
    COMMANDS,
    Help,
    Snooze,
    Status,
    Stop,
    allow_name,
    help_text,
    parse,
    split_namespaced,
)
from trainwarden.bot.errors import BadInput
from trainwarden.bot.threads import run_in_metadata
from trainwarden.ops import status_messages

NAN = math.nan


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("status", Status(run=None)),
        ("STATUS exp01", Status(run="exp01")),
        ("  status   all ", Status(run=None, everything=True)),
        ("stop exp01 lr too high", Stop(run="exp01", reason="lr too high")),
        ("snooze exp01 loss-spike 30m", Snooze(run="exp01", rule="loss-spike", seconds=1800)),
        ("help", Help()),
        ("", Help()),
    ],
)
def test_tw_dispatches_to_the_same_parser_as_the_old_names(text, expected):
    assert parse("tw", text) == expected
    sub, rest = split_namespaced(text)
    if sub in COMMANDS:
        assert parse(sub, rest) == expected  # `/stop exp01 ...` and `/tw stop exp01 ...` are one command


@pytest.mark.parametrize(("text", "suggested"), [("stpo exp01", "/tw stop"), ("stat", "/tw status"),
                                                 ("snoze exp01 1h", "/tw snooze"), ("hlep", "/tw help")])  # fmt: skip
def test_an_unknown_subcommand_suggests_the_closest_and_lists_them_all(text, suggested):
    with pytest.raises(BadInput) as exc:
        parse("tw", text)
    said = str(exc.value)
    assert said.startswith(f"Unknown command /tw {text.split()[0]}. Did you mean {suggested}")
    assert all(f"`/tw {name} " in said for name in COMMANDS) and "`/tw help`" in said


def test_an_unknown_subcommand_far_from_any_gets_the_list_without_a_guess():
    with pytest.raises(BadInput) as exc:
        parse("tw", "xyzzy")
    assert str(exc.value).startswith("Unknown command /tw xyzzy.\n*/tw* commands:")


def test_tw_text_is_checked_before_dispatch():
    with pytest.raises(BadInput, match="characters ;"):
        parse("tw", "stop exp01; rm -rf /")
    with pytest.raises(BadInput, match=r"Usage: /tw stop RUN \[REASON\]"):
        parse("tw", "stop")


def test_help_lists_every_subcommand_and_the_thread_actions():
    text = help_text()
    assert [line.split("`")[1].split()[1] for line in text.splitlines()[1:6]] == [*COMMANDS, "help"]
    assert "Run actions" in text and "thread" in text


@pytest.mark.parametrize(
    ("command", "text", "allow"),
    [("tw", "stop exp01", "stop"), ("stop", "exp01", "stop"), ("tw", "", "help"), ("tw", "help", "help"),
     ("tw", "stpo exp01", "help"), ("tw", "Launch demo", "launch")],
)  # fmt: skip
def test_the_allow_list_of_a_request_is_its_subcommands(command, text, allow):
    assert allow_name(command, text) == allow


def test_a_tw_request_is_audited_under_the_name_it_was_typed_as_and_its_run():
    request = identify({"command": "/tw", "text": "stop exp01 lr", "user_id": "U1", "channel_id": "C1"})
    assert request is not None
    assert (request.command, request.name, request.target) == ("stop", "/tw stop", "exp01")
    assert request.text == "stop exp01 lr"
    old = identify({"command": "/stop", "text": "exp01 lr", "user_id": "U1", "channel_id": "C1"})
    assert old is not None and (old.command, old.name, old.target) == ("stop", "/stop", "exp01")


def test_a_shortcut_is_a_status_request_about_the_run_in_the_messages_metadata():
    meta = {"event_type": "trainwarden_notification", "event_payload": {"key": "k", "run": "exp01"}}
    body = {"type": "message_action", "callback_id": "tw_run_actions", "user": {"id": "U1"},
            "channel": {"id": "C1"}, "message": {"ts": "1.2", "metadata": meta}}  # fmt: skip
    request = identify(body)
    assert request is not None and (request.command, request.target) == ("status", "exp01")
    assert run_in_metadata({"ts": "1.2", "text": "a person's reply"}) is None
    assert run_in_metadata({"metadata": {"event_type": "other_app", "event_payload": {"run": "x"}}}) is None


@pytest.mark.parametrize(
    ("values", "expected"),
    [([NAN], "nan"), ([NAN, NAN, NAN], "nan"), ([2.0, 1.0, NAN], "nan █▁"), ([2.0, 1.5, 1.0], "1 █▄▁"),
     ([math.inf], "inf"), ([1.5], "1.5"), ([], "n/a")],
)  # fmt: skip
def test_the_loss_column_says_nan_not_a_row_of_marks(values, expected):
    assert status_messages.value_trend(values) == expected

"""One duration grammar and one format: policies, `/snooze`, `--older-than` and `--since` accept the same
texts, refuse the same texts saying why, and every message shows a duration the same way."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trainwarden.bot import message_parts
from trainwarden.bot.commands import Snooze, parse, snooze_duration
from trainwarden.bot.errors import BadInput
from trainwarden.core.errors import UsageError
from trainwarden.ops.times import parse_time
from trainwarden.policies.durations import Persistence, duration_problem, fmt_duration, parse_duration

from tests.policy_helpers import policy
from trainwarden.cli.archive import parse_age

NOW = 1_800_000_000.0

GOOD = [("90s", 90), ("10m", 600), ("1h30m", 5400), ("2d", 172800), ("1.5h", 5400), ("25h01m", 90060),
        ("25h1m", 90060), ("1d01h", 90000), ("1m30s", 90), ("7d", 604800), ("500ms", 0.5), (" 30m ", 1800)]  # fmt: skip
BAD = [("10 mins", "'mins' is not a unit"), ("60", "60 has no unit"), ("-1h", "never negative"),
       ("30m1h", "from the largest to the smallest"), ("1h1h", "from the largest to the smallest"),
       ("1h 30m", "without spaces: 1h30m"), ("1H", "'H' is not a unit"), ("1h30", "30 has no unit"),
       ("h1", "not a number followed by a unit"), ("", "empty")]  # fmt: skip


@pytest.mark.parametrize(("text", "seconds"), GOOD)
def test_the_grammar(text, seconds):
    assert parse_duration(text) == seconds
    assert duration_problem(text) == ""


@pytest.mark.parametrize(("text", "seconds"), GOOD)
def test_every_front_end_accepts_the_same_texts(text, seconds):
    assert snooze_duration(text.strip()) == seconds
    assert parse(command="snooze", text=f"exp1 {text.strip()}") == Snooze(run="exp1", rule=None, seconds=seconds)
    assert parse_age(text) == seconds
    assert parse_time(text, now=NOW, option="--since") == NOW - seconds
    rule = policy(f"  - {{id: x, kind: threshold, metric: loss, above: 1, for: '{text}', cooldown: '{text}'}}\n")
    assert rule.rules[0].persist == Persistence(seconds=seconds) and rule.rules[0].cooldown_s == seconds


def test_snooze_1h30m_through_the_bot_command_parser():
    assert parse("snooze", "exp1 1h30m") == Snooze(run="exp1", rule=None, seconds=5400)


@pytest.mark.parametrize(("text", "why"), BAD)
def test_every_front_end_refuses_the_same_texts_saying_why(text, why):
    assert parse_duration(text) is None
    problem = duration_problem(text)
    assert why in problem and "like 30s, 10m, 2h or 1h30m" in problem, problem
    with pytest.raises(BadInput) as bot:
        snooze_duration(text)
    assert why in str(bot.value) and "1h30m" in str(bot.value)
    with pytest.raises(UsageError) as age:
        parse_age(text)
    assert why in str(age.value) and "like 30d" in str(age.value)


@pytest.mark.parametrize("text", ["10mins", "1h30", "30m1h", "5x"])
def test_since_says_what_is_wrong_with_a_duration(text):
    with pytest.raises(UsageError) as exc:
        parse_time(text, now=NOW, option="--since")
    assert str(exc.value).startswith(f"--since: {text!r} is not a duration: ") and "like 30m or 1h30m" in str(exc.value)


def test_ranges_are_the_callers_and_say_so():
    for text in ("0m", "8d"):
        with pytest.raises(BadInput, match="at most 7d, like 1h30m"):
            snooze_duration(text)
    with pytest.raises(UsageError, match="more than 0s"):
        parse_age("0s")


FORMATS = [(0, "0s"), (0.25, "250ms"), (1, "1s"), (42, "42s"), (60, "1m"), (61, "1m01s"), (427, "7m07s"),
           (3599, "59m59s"), (3599.6, "1h"), (3600, "1h"), (3660, "1h01m"), (5400, "1h30m"), (86399, "1d"),
           (86400, "1d"), (90000, "1d01h"), (90060, "1d01h"), (604800, "7d"), (2592000, "30d"), (-5, "0s")]  # fmt: skip


@pytest.mark.parametrize(("seconds", "text"), FORMATS)
def test_the_one_format(seconds, text):
    assert fmt_duration(seconds) == text
    assert fmt_duration(parse_duration(text)) == text  # a formatted duration parses back to itself


@pytest.mark.parametrize("seconds", [30, 1800, 5400, 86400 + 3600])
def test_messages_and_policies_show_durations_the_same_way(seconds):
    shown = fmt_duration(seconds)
    assert message_parts.button_snooze(seconds) == f"Snooze {shown}"
    assert Persistence(seconds=seconds).describe() == shown


@given(st.integers(min_value=0, max_value=400 * 86400))
def test_round_trip(seconds):
    text = fmt_duration(seconds)
    back = parse_duration(text)
    assert back is not None and fmt_duration(back) == text
    # only the units below the two shown are rounded away
    unit = 1 if seconds < 3600 else 60 if seconds < 86400 else 3600
    assert abs(back - seconds) <= unit / 2

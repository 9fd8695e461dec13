"""Command-line times: every form the help texts promise parses to the moment a user means."""

from datetime import datetime

import pytest
from trainwarden.core.errors import UsageError
from trainwarden.ops.times import parse_time

NOW = datetime(2026, 12, 3, 10, 0, 0).timestamp()  # local time, as a user's clock shows it


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", NOW - 1800),
        ("30m ago", NOW - 1800),  # as the replay help writes it
        ("1h30m AGO", NOW - 5400),
        ("1700000000", 1700000000.0),
        ("2026-12-02T17:38", datetime(2026, 12, 2, 17, 38).timestamp()),
        ("09:51", datetime(2026, 12, 3, 9, 51).timestamp()),  # today's
        ("9:51:30", datetime(2026, 12, 3, 9, 51, 30).timestamp()),
        ("10:00", NOW),
        ("23:15", datetime(2026, 12, 2, 23, 15).timestamp()),  # not come yet today: yesterday's
    ],
)
def test_times_parse(text, expected):
    assert parse_time(text, now=NOW, option="--since") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [("25:00", "not a clock time"), ("30x ago", "is not a duration"), ("yesterday", "a clock time like 09:51")],
)
def test_bad_times_say_what_is_expected(text, message):
    with pytest.raises(UsageError, match=message):
        parse_time(text, now=NOW, option="--as-of")

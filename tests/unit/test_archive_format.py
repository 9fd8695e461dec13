"""The archive line format, stream ids and the holds an archive may not pass (pure code)."""

import json
import math

import pytest
from trainwarden.archive.errors import ArchiveFormatError
from trainwarden.archive.format import (
    ArchiveParser,
    Footer,
    Header,
    archive_name,
    decode_line,
    encode_footer,
    encode_header,
    encode_line,
    parse_archive_name,
    parse_lines,
)
from trainwarden.archive.holds import Hold, checkpoint_holds, tightest
from trainwarden.core.errors import UsageError
from trainwarden.events.sids import sid_key, sid_successor
from trainwarden.events.store import Malformed

from tests.helpers import metric
from trainwarden.cli.archive import old_runs, parse_age


def canonical(item):
    return repr(item)  # NaN compares unequal to itself; its repr does not


def test_an_event_line_holds_the_whole_envelope_under_long_names_and_round_trips_nan():
    event = metric("exp01", 7, step=7, loss=math.nan, lr=math.inf, floor=-math.inf, note="ünï")
    line = encode_line("1796233170110-3", event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    text = line.decode()
    assert '"loss":NaN' in text and '"lr":Infinity' in text and '"floor":-Infinity' in text and "ünï" in text
    obj = json.loads(text)
    assert list(obj) == ["stream_id", "id", "type", "v", "run", "host", "ts", "seq", "data"]
    sid, back = decode_line(line)
    assert sid == "1796233170110-3"
    assert canonical(back) == canonical(event)
    assert math.isnan(back.data["loss"]) and back.data["lr"] == math.inf


def test_a_malformed_entry_keeps_its_raw_fields_even_when_they_are_not_utf8():
    bad = Malformed(sid="5-0", reason="not valid JSON: ...", fields={b"e": b"{oops", b"x\xff": b"\x00\xfe"})
    sid, back = decode_line(encode_line("5-0", bad))
    assert sid == "5-0"
    assert back == bad


def lines_of(entries, run="exp01", footer=None):
    body = [encode_line(sid, item) for sid, item in entries]
    first = entries[0][0] if entries else None
    last = entries[-1][0] if entries else None
    return [encode_header(Header(run=run)), *body, encode_footer(footer or Footer(len(entries), first, last))]


def test_a_whole_file_parses_back_in_order():
    entries = [(f"10-{i}", metric("exp01", i, loss=float(i))) for i in range(5)]
    assert [(s, canonical(e)) for s, e in parse_lines(lines_of(entries))] == [(s, canonical(e)) for s, e in entries]


GOOD = [("10-0", metric("exp01", 1, loss=1.0)), ("10-1", metric("exp01", 2, loss=2.0))]


@pytest.mark.parametrize(
    ("lines", "where", "message"),
    [
        ([encode_line(*GOOD[0])], ":1:", "not a trainwarden archive: the first line must be its header"),
        ([b"\x00garbage\n"], ":1:", "not valid JSON"),
        ([encode_header(Header("exp01")), b"{not json\n"], ":2:", "not valid JSON"),
        (
            [encode_header(Header("exp01")), b'{"stream_id":"1-0","id":"p:1","type":"metric"}\n'],
            ":2:",
            "missing envelope field 'v'",
        ),
        ([encode_header(Header("exp01")), b'{"stream_id":"one","id":"p:1"}\n'], ":2:", "invalid 'stream_id'"),
        (
            [encode_header(Header("exp01")), encode_line("10-1", GOOD[0][1]), encode_line("10-0", GOOD[1][1])],
            ":3:",
            "stream id 10-0 is not after the previous line's 10-1",
        ),
        ([encode_header(Header("other")), encode_line(*GOOD[0])], ":2:", "an event of run 'exp01' in an archive of"),
        (lines_of(GOOD)[:-1], ":3:", "ends without its footer line: it was cut short"),
        (lines_of(GOOD, footer=Footer(3, "10-0", "10-1")), ":4:", "the footer says 3 entries"),
        ([*lines_of(GOOD), encode_line("11-0", GOOD[0][1])], ":5:", "text after the footer"),
        ([b'{"archive":"trainwarden","format":9,"run":"exp01"}\n'], ":1:", "archive format 9 is not supported"),
        ([], "", "empty file"),
    ],
)
def test_a_bad_file_is_refused_with_its_line_number(lines, where, message):
    with pytest.raises(ArchiveFormatError) as info:
        list(parse_lines(lines, source="exp01.jsonl.gz"))
    assert f"exp01.jsonl.gz{where}" in str(info.value)
    assert message in str(info.value)


def test_the_parser_counts_what_it_read():
    parser = ArchiveParser("f")
    for raw in lines_of(GOOD):
        parser.feed(raw)
    assert parser.finish() == Footer(2, "10-0", "10-1")
    assert parser.header == Header("exp01")


def test_file_names_are_deterministic_and_parse_back():
    name = archive_name("1796233170110-0", "1796233170999-12")
    assert name == "1796233170110-0_1796233170999-12.jsonl.gz"
    assert parse_archive_name(name) == ("1796233170110-0", "1796233170999-12")
    assert parse_archive_name(".archive-12.partial") is None
    assert parse_archive_name("notes.jsonl.gz") is None


def test_stream_ids_compare_as_numbers_and_have_a_successor():
    assert sid_key("9-0") < sid_key("10-0") < sid_key("10-1")
    assert sid_successor("10-4") == "10-5"
    assert sid_successor(f"10-{2**64 - 1}") == "11-0"


def test_the_tightest_hold_wins_and_exclusive_beats_inclusive_at_the_same_id():
    holds = [
        Hold("20-0", True, "the workers", "w"),
        Hold("15-0", True, "the notifier", "n"),
        Hold("15-0", False, "the workers", "pending"),
    ]
    assert tightest(holds) == holds[2]
    assert tightest([]) is None
    assert holds[2].bound == "(15-0" and holds[1].bound == "15-0"


def test_holds_from_the_checkpoints():
    worker = {b"after": b"30-0", b"pending": json.dumps([{"kind": "stop", "sid": "25-0"}]).encode()}
    holds = checkpoint_holds(worker, {b"after": b"28-0", b"state": b"{}"})
    assert [(h.sid, h.inclusive, h.who) for h in holds] == [
        ("30-0", True, "the workers"), ("25-0", False, "the workers"), ("28-0", True, "the notifier")
    ]  # fmt: skip
    assert tightest(holds).sid == "25-0"
    assert "pending stop action" in tightest(holds).why
    assert checkpoint_holds({}, {}) == []
    (nothing,) = checkpoint_holds({b"pending": b"[]"}, {})  # a checkpoint that has read nothing holds everything
    assert nothing.sid == "0-0" and nothing.inclusive


def test_older_than_takes_ages_and_leaves_the_system_run_alone():
    assert [parse_age(a) for a in ("30d", "12h", "90m", "3600s")] == [2592000, 43200, 5400, 3600]
    for bad in ("30 days", "0s", "-1d", ""):
        with pytest.raises(UsageError, match="expected an age like 30d"):
            parse_age(bad)
    runs = [("new", 900.0), ("old", 100.0), ("trainwarden.system", 50.0), ("older", 10.0), ("edge", 500.0)]
    assert old_runs(runs, cutoff=500.0) == ["older", "old"]

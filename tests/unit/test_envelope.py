import itertools

import pytest
from trainwarden.events.envelope import check_run_name, make_event, time_seq
from trainwarden.events.errors import EnvelopeError


@pytest.mark.parametrize("run", ["", "a b", "../etc", "-x", "x;rm", "a" * 101, "é", "run$(id)"])
def test_bad_run_names_are_refused(run):
    with pytest.raises(EnvelopeError, match="invalid run name"):
        check_run_name(run)


@pytest.mark.parametrize("run", ["exp01", "exp01-baseline", "a.b_c-d", "X" * 100])
def test_good_run_names(run):
    assert check_run_name(run) == run


def test_id_is_producer_and_seq():
    event = make_event("metric", run="r", host="h", producer="h/log/r/g0", seq=7)
    assert event.id == "h/log/r/g0:7"
    assert event.producer == "h/log/r/g0"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"event_type": "Metric"}, "invalid event type"),
        ({"producer": "has space"}, "invalid producer"),
        ({"producer": "a:b"}, "invalid producer"),
        ({"seq": -1}, "non-negative"),
        ({"seq": True}, "non-negative"),
        ({"host": ""}, "host"),
        ({"data": [1]}, "data must be a dict"),
    ],
)
def test_make_event_validates(kwargs, message):
    args = {"event_type": "metric", "run": "r", "host": "h", "producer": "p", "seq": 1, **kwargs}
    with pytest.raises(EnvelopeError, match=message):
        make_event(args.pop("event_type"), **args)


def test_time_seq_strictly_increases():
    seqs = [time_seq() for _ in range(10_000)]
    assert all(b > a for a, b in itertools.pairwise(seqs))

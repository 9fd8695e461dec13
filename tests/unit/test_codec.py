import json
import math
import re

import pytest
from trainwarden.events import codec
from trainwarden.events.codec import decode, decode_fields, encode, encode_full
from trainwarden.events.envelope import make_event
from trainwarden.events.errors import DecodeError


def sample(**data):
    return make_event("metric", run="exp01", host="ic2", producer="ic2/log/exp01/g0", seq=42, data=data, ts=1.5)


def test_round_trip_keeps_every_envelope_field():
    event = sample(step=3, loss=2.5)
    assert decode(encode(event), "exp01") == event


@pytest.mark.parametrize("value", [math.inf, -math.inf])
def test_round_trip_non_finite(value):
    back = decode(encode(sample(loss=value)), "exp01")
    assert back.data["loss"] == value


def test_round_trip_nan():
    back = decode(encode(sample(loss=math.nan)), "exp01")
    assert math.isnan(back.data["loss"])


def test_unknown_type_survives():
    event = make_event("lab.custom", run="exp01", host="ic2", producer="p", seq=1, data={"xid": 79})
    assert decode(encode(event), "exp01").type == "lab.custom"


@pytest.mark.parametrize(("event_type", "data", "message"), [
    ("run.launched", {"host": "gpu1", "session": 5}, "session=5 is not str"),
    ("stop.requested", {"by": "cli", "reason": ["x"]}, "reason=['x'] is not str"),
    ("gpu.xid", {"xid": "79"}, "xid='79' is not int"),
])  # fmt: skip
def test_a_known_type_with_data_it_does_not_declare_is_refused(event_type, data, message):
    """A wrong-typed session would become the stop target; a list would be posted as the reason."""
    event = make_event(event_type, run="exp01", host="ic2", producer="p", seq=1, data=data)
    with pytest.raises(DecodeError, match=re.escape(message)):
        decode(encode(event), "exp01")


def test_a_field_left_out_is_read_as_absent():  # an older version's log replays
    event = make_event("gpu.xid", run="exp01", host="ic2", producer="p", seq=1, data={"xid": 79})
    assert decode(encode(event), "exp01").data == {"xid": 79}


def test_an_entry_naming_another_run_is_refused_in_this_runs_stream():
    event = make_event("stop.requested", run="exp02", host="ic2", producer="p", seq=1, data={"reason": "x"})
    with pytest.raises(DecodeError, match="names run 'exp02' but is in the stream of run 'exp01'"):
        decode(encode_full(event), "exp01")
    assert decode(encode_full(event), "exp02").run == "exp02"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"not json", "not valid JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"id": "p:1", "type": "metric"}', "missing envelope field"),
        (b'{"id": 1, "type": "metric", "v": 1, "run": "r", "host": "h", "ts": 1, "seq": 1, "data": {}}', "strings"),
        (
            b'{"id": "p:1", "type": "metric", "v": "1", "run": "r", "host": "h", "ts": 1, "seq": 1, "data": {}}',
            "integers",
        ),
        (
            b'{"id": "p:1", "type": "metric", "v": 1, "run": "r", "host": "h", "ts": "x", "seq": 1, "data": {}}',
            "ts must be a number",
        ),
        (
            b'{"id": "p:1", "type": "metric", "v": 1, "run": "r", "host": "h", "ts": 1, "seq": 1, "data": []}',
            "data must be an object",
        ),
        (
            b'{"id": "p:2", "type": "metric", "v": 1, "run": "r", "host": "h", "ts": 1, "seq": 1, "data": {}}',
            "does not end with its seq",
        ),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_strict_decoding_says_what_is_wrong(raw, message):
    with pytest.raises(DecodeError, match=message):
        decode(raw)


def test_decode_fields_requires_the_event_field():
    with pytest.raises(DecodeError, match="no 'e' field"):
        decode_fields({b"x": b"{}"})


def test_old_versions_are_upgraded_on_read(monkeypatch):
    monkeypatch.setitem(codec.UPGRADERS, ("metric", 1), lambda d: {**d, "upgraded": True})
    raw = json.dumps(
        {"id": "p:1", "type": "metric", "v": 1, "run": "r", "host": "h", "ts": 1, "seq": 1, "data": {"loss": 1.0}}
    )
    event = decode(raw)
    assert event.v == 2
    assert event.data == {"loss": 1.0, "upgraded": True}


def agent_metric(**kw):
    base = dict(run="llama-7b-sft", host="gpu-node-01", producer="gpu-node-01/log/llama-7b-sft/g0", seq=123_456_789)
    base.update(kw)
    return make_event("metric", data={"step": 1200, "loss": 2.3456, "lr": 3e-4}, ts=1796278668.1172833, **base)


def test_stored_form_is_compact_and_gives_back_every_field():
    event = agent_metric()
    raw = encode(event)
    assert b"llama-7b-sft" not in raw  # the stream key names the run
    assert b'"t"' not in raw and b'"h"' not in raw  # metric, and a producer that starts with its host
    assert len(raw) < len(codec.encode_full(event)) * 0.7
    assert decode(raw, "llama-7b-sft") == event


@pytest.mark.parametrize(
    ("host", "producer"),
    [
        ("llama-7b-sft-box", "llama-7b-sft-box/log/llama-7b-sft/g0"),  # the run inside the host name
        ("a/b", "a/b/log/llama-7b-sft/g0"),  # a host with a slash
        ("gpu-node-01", "worker@gpu-node-01"),  # a producer that does not start with its host
        ("h$r", "h/llama-7b-sft"),  # a host holding the run's token
    ],
)
def test_stored_form_round_trips_awkward_names(host, producer):
    event = agent_metric(host=host, producer=producer)
    assert decode(encode(event), "llama-7b-sft") == event


def test_odd_ids_other_types_and_versions_round_trip():
    from trainwarden.events.envelope import Event

    odd = Event(id="p$x:7", type="gpu", run="r1", host="h", ts=1.0, seq=7, data={})
    assert decode(encode(odd), "r1") == odd
    versioned = Event(id="h/p:8", type="gpu", run="r1", host="h", ts=1.0, seq=8, data={"u": 1}, v=3)
    assert decode(encode(versioned), "r1") == versioned


def test_compact_form_needs_the_run():
    with pytest.raises(DecodeError, match="needs its run"):
        decode(encode(agent_metric()))


def test_full_form_is_self_contained():
    event = agent_metric()
    assert decode(codec.encode_full(event)) == event


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"i": "h/p:1"}', "ts \\('s'\\) must be a number"),
        (b'{"i": "h/p:x", "s": 1}', "does not end with ':<seq>'"),
        (b'{"i": 5, "s": 1}', "i must be a string"),
        (b'{"i": "h/p:1", "s": 1, "d": []}', "data must be an object"),
        (b'{"i": "h/p:1", "s": 1, "t": 3}', "t and h must be strings"),
        (b'{"i": "h/p:1", "s": 1, "v": 0}', "v must be an integer"),
    ],
)
def test_strict_decoding_of_the_stored_form(raw, message):
    with pytest.raises(DecodeError, match=message):
        decode(raw, "r1")


def test_surrounding_whitespace_is_read_and_trailing_garbage_refused():
    """The fast path reads what we write; text written by hand takes the full path, with its message."""
    event = make_event("metric", run="exp01", host="gpu1", producer="p", seq=1, data={"step": 1, "loss": 2.0}, ts=1.0)
    raw = encode(event).decode()
    assert decode(f"  {raw}\n", "exp01") == decode(raw, "exp01")
    with pytest.raises(DecodeError, match="Extra data"):
        decode(raw + "x", "exp01")

import json
import math

import pytest

from events import codec
from events.codec import decode, decode_fields, encode
from events.envelope import make_event
from events.errors import DecodeError


def sample(**data):
    return make_event("metric", run="exp01", host="ic2", producer="ic2/log/exp01/g0", seq=42, data=data, ts=1.5)


def test_round_trip_keeps_every_envelope_field():
    event = sample(step=3, loss=2.5)
    assert decode(encode(event)) == event


@pytest.mark.parametrize("value", [math.inf, -math.inf])
def test_round_trip_non_finite(value):
    back = decode(encode(sample(loss=value)))
    assert back.data["loss"] == value


def test_round_trip_nan():
    back = decode(encode(sample(loss=math.nan)))
    assert math.isnan(back.data["loss"])


def test_unknown_type_survives():
    event = make_event("gpu.xid", run="exp01", host="ic2", producer="p", seq=1, data={"xid": 79})
    assert decode(encode(event)).type == "gpu.xid"


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

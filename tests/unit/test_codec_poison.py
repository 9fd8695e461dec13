"""Whatever a stream entry holds, decoding raises DecodeError and nothing else; metric data that would
mislead a policy (an overflowing numeral, a step that is no step) is refused, a written NaN/Infinity is kept."""

import contextlib
import json
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from trainwarden.core.jsonload import float_literal, loads, too_deep
from trainwarden.core.metrics import MAX_STEP, value_problem, without_problems
from trainwarden.events.codec import decode, encode
from trainwarden.events.envelope import make_event
from trainwarden.events.errors import DecodeError

RUN = "exp01"


def compact(data: str, *, t: str = "", ts: str = "1000.0") -> str:
    typ = f'"t":"{t}",' if t else ""
    return f'{{"i":"gpu1/log/$r/g0:7",{typ}"s":{ts},"d":{data}}}'


def decodes_or_refuses(raw: bytes | str) -> None:
    with contextlib.suppress(DecodeError):  # the only exception allowed
        decode(raw, RUN)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
@example(b"[" * 100_000)
@example(b"{" * 5000)
@example(b'{"i":"h/x:' + b"9" * 5000 + b'","s":1}')
@example(b"\xff\xfe")
def test_arbitrary_bytes_raise_only_decode_error(raw):
    decodes_or_refuses(raw)


KEYS = st.sampled_from(["i", "s", "d", "t", "h", "v", "id", "type", "run", "host", "ts", "seq", "data", "step", "loss"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(max_size=4), inner, max_size=6),
    max_leaves=12,
)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_arbitrary_json_raises_only_decode_error(value):
    decodes_or_refuses(json.dumps(value))


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5), st.sampled_from(["", "metric", "gpu", "x.y"]))
def test_arbitrary_data_in_a_well_formed_envelope_raises_only_decode_error(data, event_type):
    decodes_or_refuses(compact(json.dumps(data), t=event_type))


@pytest.mark.parametrize("depth", [33, 5000, 100_000])
def test_nesting_too_deep_is_refused_before_parsing(depth):
    raw = compact('{"x":' + "[" * depth + "]" * depth + "}")
    with pytest.raises(DecodeError, match="nested deeper than"):
        decode(raw, RUN)


def test_brackets_inside_strings_do_not_count_as_nesting():
    line = "[" * 10_000 + '\\"' + "{" * 100
    event = decode(compact(json.dumps({"tag": "error", "line": line}), t="log.line"), RUN)
    assert event.data["line"] == line


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ('{"step":1e400,"loss":-1e400}', "step must be"),
        ('{"step":3,"loss":-1e400}', "out of range"),
        ('{"step":3,"loss":1' + "0" * 400 + "}", "loss is out of range"),
        ('{"step":"abc","loss":1.0}', "step is not a number"),
        ('{"step":-1,"loss":1.0}', "step must be"),
        ('{"step":2.5,"loss":1.0}', "step must be"),
        ('{"step":NaN,"loss":1.0}', "step must be"),
        ('{"step":true}', "step must be"),
        ('{"loss":[1]}', "loss is not a number"),
        ('{"loss":{"a":1}}', "loss is not a number"),
    ],
)
def test_metric_data_that_would_mislead_a_policy_is_refused(data, message):
    with pytest.raises(DecodeError, match=message):
        decode(compact(data), RUN)


@pytest.mark.parametrize("ts", ["1e400", "-1e400", "NaN", "Infinity", "1" + "0" * 400])
def test_a_time_that_is_no_time_is_refused(ts):
    with pytest.raises(DecodeError, match="ts"):
        decode(compact('{"step":1}', ts=ts), RUN)


def test_a_written_nan_or_infinity_is_a_metric_value():
    event = decode(compact('{"step":7.0,"loss":NaN,"grad_norm":Infinity,"x":-Infinity,"ok":true}'), RUN)
    assert math.isnan(event.data["loss"]) and event.data["grad_norm"] == math.inf and event.data["step"] == 7.0
    nan = make_event("metric", run=RUN, host="gpu1", producer="gpu1/log/exp01/g0", seq=8,
                     data={"step": 8, "loss": math.nan}, ts=1.0)  # fmt: skip
    assert math.isnan(decode(encode(nan), RUN).data["loss"])  # what the agent writes for `loss: nan`


def test_other_event_types_keep_their_own_data():
    event = decode(compact('{"step":"abc","nested":{"a":[1,2]}}', t="run.launched"), RUN)
    assert event.data["step"] == "abc"


def test_float_literal_refuses_overflow_but_keeps_the_words():
    assert float_literal("1.5e3") == 1500.0
    assert math.isnan(float_literal("nan")) and float_literal("-Infinity") == -math.inf and float_literal("INF")
    for text in ("1e400", "-1e999", "9" * 400):
        with pytest.raises(ValueError, match="out of range"):
            float_literal(text)


def test_loads_raises_only_value_error():
    for text in ("[" * 100_000, "{" * 100, '{"a":' * 65):
        with pytest.raises(ValueError):
            loads(text)
    assert too_deep("[" * 65) and not too_deep("[" * 64 + "]" * 64)
    assert loads('{"a":"[[[["}') == {"a": "[[[["}


def test_the_agent_leaves_out_only_the_values_refused():
    data, problems = without_problems({"step": -1, "loss": math.nan, "lr": 10**400})
    assert data == {"loss": data["loss"]} and math.isnan(data["loss"])
    assert len(problems) == 2
    assert value_problem("step", MAX_STEP) is None and value_problem("step", MAX_STEP + 1) is not None
    assert value_problem("epoch", 0.5) is None and value_problem("step", 0) is None

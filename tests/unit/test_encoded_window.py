"""The recent-metrics window: kept encoded until read, stored one record a line, equal to what was appended."""

from __future__ import annotations

import json
import math

from trainwarden.events.projection import RECENT_METRICS, RunState, apply
from trainwarden.events.window import EncodedWindow
from trainwarden.workers.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint

from tests.helpers import metric


def test_it_keeps_the_last_maxlen_records_and_reads_them_back_as_appended():
    w = EncodedWindow(maxlen=3)
    for i in range(5):
        w.append({"step": i, "loss": 1.0 / (i + 1), "note": "a\nb"})
    assert len(w) == 3 and w[-1]["step"] == 4
    again = EncodedWindow.from_lines(w.lines(), maxlen=3)
    assert list(again) == [{"step": i, "loss": 1.0 / (i + 1), "note": "a\nb"} for i in (2, 3, 4)]
    assert again == w
    again.append({"step": 5})  # appended after a read and after a write: both forms mix
    assert [r["step"] for r in again] == [3, 4, 5]
    assert EncodedWindow.from_lines("", maxlen=3) == EncodedWindow(maxlen=3)


def test_a_record_is_encoded_once_and_decoded_only_when_read():
    w = EncodedWindow([{"loss": 2.0}], maxlen=5)
    first = w.lines()
    record = {"loss": float("nan")}
    w.append(record)
    assert w.lines() == first + "\n" + json.dumps(record)  # NaN as json.dumps writes it, and reads it
    record["loss"] = 9.0  # the stored form was made when written: a later change to the dict is not in it
    assert math.isnan(EncodedWindow.from_lines(w.lines(), maxlen=5)[-1]["loss"])


def test_the_checkpoint_stores_recent_metrics_in_their_own_field_and_reads_an_older_one_too():
    cp = Checkpoint()
    for i in range(1, RECENT_METRICS + 11):
        apply(cp.run, metric("r", i, step=i, loss=1.0 / i))
    fields = encode_checkpoint(cp).applied()
    assert b"recent_metrics" not in fields[b"run"] and fields[b"recent"].count(b"\n") == RECENT_METRICS - 1
    back = decode_checkpoint(fields)
    assert back.run == cp.run and back.run.to_dict() == cp.run.to_dict()
    assert [m["step"] for m in back.run.recent_metrics] == list(range(11, RECENT_METRICS + 11))
    older = dict(fields)  # as written before the field existed: the metrics inside `run`
    del older[b"recent"]
    older[b"run"] = json.dumps(cp.run.to_dict()).encode()
    assert decode_checkpoint(older).run == cp.run
    older[b"recent"] = b""  # the field left by a newer writer, the state written since by an older one: its wins
    assert decode_checkpoint(older).run == cp.run


def test_a_view_saved_as_json_reads_back_the_same():
    state = RunState()
    for i in range(1, 4):
        apply(state, metric("r", i, step=i, loss=2.0))
    assert RunState.from_dict(json.loads(json.dumps(state.to_dict()))) == state

"""The readers' view of a run (events/run_view.py): a fold of the log with its own snapshot."""

from __future__ import annotations

import json

import pytest
from trainwarden.archive.archiver import Archiver
from trainwarden.events import run_view
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.projection import fold

from tests.helpers import events_of, metric

pytestmark = pytest.mark.redis
RUN = "exp-view"


def launched(seq: int = 1):
    return make_event(t.RUN_LAUNCHED, run=RUN, host="gpu1", producer="launch", seq=seq, data={"host": "gpu1"})


def test_the_view_is_the_fold_of_the_log_and_a_later_read_folds_only_the_new_events(store, r):
    store.append([launched(), *(metric(RUN, i, step=i, loss=1.0 / i) for i in range(1, 30))])
    r.xadd(store.keys.log(RUN), {"e": b"garbage"})  # undecodable entries are stepped over
    state = run_view.run_state(store, RUN)
    assert state.to_dict() == fold(events_of(store, RUN)).to_dict()
    assert (state.host, state.status, state.step) == ("gpu1", "running", 29)
    _, after = run_view.load(store, RUN)
    assert after == r.xrevrange(store.keys.log(RUN), count=1)[0][0].decode()

    store.append([metric(RUN, 30, step=30, loss=0.01)])
    r.hset(store.keys.view(RUN), "state", json.dumps({**state.to_dict(), "host": "from-the-snapshot"}))
    moved = run_view.run_state(store, RUN)
    assert (moved.host, moved.step) == ("from-the-snapshot", 30)  # the snapshot was used, the new event folded
    assert run_view.load(store, RUN)[0].step == 30


def test_a_reader_does_not_overwrite_a_snapshot_that_moved_under_it(store, r):
    store.append([launched(), metric(RUN, 1, step=1, loss=1.0)])
    run_view.run_state(store, RUN)
    saved = r.hgetall(store.keys.view(RUN))
    store.append([metric(RUN, 2, step=2, loss=1.0)])
    original_iter = store.iter_run

    def moved_meanwhile(*args, **kwargs):
        r.hset(store.keys.view(RUN), "after", "0-1")  # another reader (or the archiver) saved first
        yield from original_iter(*args, **kwargs)

    store.iter_run = moved_meanwhile
    assert run_view.run_state(store, RUN).step == 2
    assert r.hget(store.keys.view(RUN), "state") == saved[b"state"]  # not replaced


def test_the_view_keeps_what_the_archiver_trimmed_from_the_log(store, r, tmp_path):
    store.append([launched(), *(metric(RUN, i, step=i, loss=1.0) for i in range(1, 11))])
    result = Archiver(store, tmp_path / "arch", host="ops1").archive(RUN)
    assert result.trimmed == 11 and store.length(RUN) == 0
    store.append([metric(RUN, 11, step=11, loss=0.5)])
    state = run_view.run_state(store, RUN)
    assert (state.host, state.status, state.step, state.event_count) == ("gpu1", "running", 11, 12)


def test_the_view_keeps_its_recent_metrics_one_a_line_and_reads_them_back(store, r):
    store.append([launched(), *(metric(RUN, i, step=i, loss=1.0 / i) for i in range(1, 60))])
    state = run_view.run_state(store, RUN)
    saved = r.hgetall(store.keys.view(RUN))
    assert b"recent_metrics" not in saved[b"state"] and len(saved[b"recent"].split(b"\n")) == 50
    loaded, _ = run_view.load(store, RUN)
    assert loaded == state and [m["step"] for m in loaded.recent_metrics] == list(range(10, 60))

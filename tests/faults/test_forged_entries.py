"""Entries written straight into a run's stream (anyone with the Redis password can) that would once have
made a false "stopped": a `run.launched` whose session is not a string (it became the stop target, the stop
ran against the default tmux server, found "no such session" and said STOPPED while the run trained on), an
entry naming another run (its NaN stopped this one), a `stop.requested` whose reason is a list (carried out
and posted as `['x']`), and a feed entry naming no valid run (retried for ever). Each is dead-lettered with
its reason; the real NaN after them stops the real run, in its own tmux session.

Real redis-server, the real dispatcher and worker as processes, a real tmux run to stop.
"""

import sys

import pytest
from trainwarden.events import types as t
from trainwarden.remote.local_launch import LaunchSpec, launch_local
from trainwarden.remote.stop import LocalTmuxController, StopTarget

from tests.conftest import REPO, spawn, stop_process
from tests.helpers import events_of, metric, nan_metric, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.tmux]


def full(event_id: str, event_type: str, run: str, data: str) -> str:
    seq = event_id.rpartition(":")[2]
    return (f'{{"id":"{event_id}","type":"{event_type}","v":1,"run":"{run}","host":"testhost","ts":1003.0,'
            f'"seq":{seq},"data":{data}}}')  # fmt: skip


FORGED = {
    "session not a string": full("forger/x:1", "run.launched", "exp01", '{"host":"testhost","session":5}'),
    "another run's NaN": full("forger/y:2", "metric", "exp02", '{"step":3,"loss":NaN}'),
    "a list as the reason": full("forger/z:3", "stop.requested", "exp01", '{"by":"cli","reason":["x"]}'),
}


def test_forged_entries_are_dead_lettered_and_the_real_nan_stops_the_real_run(store, r, tmp_path, tmux_socket,
                                                                              settings_file):  # fmt: skip
    spec = LaunchSpec(run="exp01", command=(sys.executable, "-c", "import time; time.sleep(120)"), workdir=REPO,
                      log_path=tmp_path / "exp01.log", tmux_socket=tmux_socket)  # fmt: skip
    launched = launch_local(spec, store=store, host="testhost")
    target = StopTarget.from_launch("exp01", launched.data, default_host="testhost")
    store.append([metric("exp01", 1, step=1, loss=2.0)])
    forged = [r.xadd(store.keys.log("exp01"), {"e": raw}).decode() for raw in FORGED.values()]
    bad_feed = r.xadd(store.keys.feed(), {"r": "../../etc", "f": "1-0", "l": "1-0", "t": "metric"}).decode()
    store.append([metric("exp01", 6, step=6, loss=2.1)])

    procs = [spawn(settings_file, tmp_path / f"{name}.log", name) for name in ("dispatcher", "worker")]
    try:
        wait_for(lambda: len(store.dead_letters()) >= len(forged) + 1, timeout=30, what="the dead letters")
        assert LocalTmuxController().is_running(target)
        assert not [e for e in events_of(store, "exp01") if e.type in (t.STOP_REQUESTED, t.STOP_DONE)
                    and e.id not in forged]  # fmt: skip
        store.append([nan_metric("exp01", 7)])
        wait_for(lambda: events_of(store, "exp01", t.STOP_DONE), timeout=30, what="stop.done")
    finally:
        for p in procs:
            stop_process(p)
        for name in ("dispatcher", "worker"):
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])

    assert not LocalTmuxController().is_running(target)
    (done,) = events_of(store, "exp01", t.STOP_DONE)
    assert done.data["session"] == launched.data["session"] and done.data["reason"] == "loss=nan at step 7"
    letters = {(d.source, d.sid): d.reason for d in store.dead_letters()}
    log_key, feed_key = store.keys.log("exp01"), store.keys.feed()
    assert sorted(letters) == sorted([*((log_key, sid) for sid in forged), (feed_key, bad_feed)]), letters
    reasons = [letters[log_key, sid] for sid in forged]
    assert "session=5 is not str" in reasons[0]
    assert "names run 'exp02' but is in the stream of run 'exp01'" in reasons[1]
    assert "reason=['x'] is not str" in reasons[2]
    assert "invalid run '../../etc'" in letters[feed_key, bad_feed]

"""The local spool: order kept, bounded (oldest kept), torn writes repaired, position survives."""

import pytest
from trainwarden.agent.errors import SpoolUnwritable
from trainwarden.agent.spool import Spool

from tests.helpers import metric


def events(n, start=1):
    return [metric("exp01", i, loss=1.0) for i in range(start, start + n)]


def test_events_come_back_in_order_and_the_spool_empties(tmp_path):
    spool = Spool(tmp_path)
    assert spool.append(events(5)) == 5
    got, pos = spool.peek(3)
    assert [e.seq for e in got] == [1, 2, 3]
    spool.commit(pos)
    reopened = Spool(tmp_path)  # a restarted agent continues where delivery stopped
    got, pos = reopened.peek(10)
    assert [e.seq for e in got] == [4, 5]
    reopened.commit(pos)
    assert reopened.empty and (tmp_path / "spool.jsonl").stat().st_size == 0


def test_a_full_spool_keeps_the_oldest_and_says_how_many_fit(tmp_path):
    probe = Spool(tmp_path / "probe")
    probe.append(events(1))
    one = probe.size
    spool = Spool(tmp_path / "s", max_bytes=3 * one + one // 2)
    assert spool.append(events(5)) == 3
    assert spool.append(events(1, start=6)) == 0
    got, _ = spool.peek(10)
    assert [e.seq for e in got] == [1, 2, 3]


def test_a_torn_last_line_is_dropped_on_open(tmp_path):
    spool = Spool(tmp_path)
    spool.append(events(2))
    with open(spool.data_path, "ab") as f:
        f.write(b'{"id": "gpu1/log/exp01/g0:3", "ty')  # killed in the middle of a write
    reopened = Spool(tmp_path)
    got, _ = reopened.peek(10)
    assert [e.seq for e in got] == [1, 2]
    reopened.append(events(1, start=3))
    assert [e.seq for e in reopened.peek(10)[0]] == [1, 2, 3]


def test_a_position_past_the_end_is_reset(tmp_path):
    Spool(tmp_path)
    (tmp_path / "spool.pos").write_text("999")
    reopened = Spool(tmp_path)
    assert reopened.empty
    reopened.append(events(1))
    assert [e.seq for e in reopened.peek(10)[0]] == [1]


def test_a_position_that_could_not_be_saved_never_makes_a_restart_skip_later_events(tmp_path):
    """Emptied while its position file cannot be written (a full disk; here a directory where the temporary
    file goes), the spool must not leave a stale position ahead of events it spools later."""
    spool = Spool(tmp_path)
    assert spool.append(events(20)) == 20
    spool.commit(spool.peek(10)[1])  # half delivered: the position is saved
    (tmp_path / "spool.pos.tmp").mkdir()  # the next position write fails
    spool.commit(spool.peek(100)[1])  # all delivered: emptied, position 0 not saved
    with pytest.raises(SpoolUnwritable):
        spool.append(events(5, start=21))  # refused while the saved position is stale
    (tmp_path / "spool.pos.tmp").rmdir()
    assert spool.append(events(5, start=21)) == 5
    assert [e.seq for e in Spool(tmp_path).peek(100)[0]] == [21, 22, 23, 24, 25]

"""The follower keeps a renamed log open while it is written, and checks a saved position's fingerprint."""

import json

from trainwarden.agent.state import AgentState, LogPosition, Partial
from trainwarden.agent.tail import LogTail


def test_a_renamed_log_is_read_on_while_written_and_closed_once_quiet_and_unwritten(tmp_path):
    log = tmp_path / "train.log"
    writer = open(log, "a")  # noqa: SIM115 - the run's descriptor, kept across the rename
    writer.write("a=1\n")
    writer.flush()
    tail = LogTail(log, rotate_wait_s=30.0, writing=lambda dev, ino: False)
    assert [x.text for x in tail.poll(now=0.0)] == ["a=1"]
    log.rename(tmp_path / "train.log.1")
    log.write_text("")
    assert tail.poll(now=1.0) == []
    writer.write("a=2\n")
    writer.flush()
    assert [(x.text, x.generation) for x in tail.poll(now=2.0)] == [("a=2", 0)]
    assert tail.resume[1:] == (0, (tmp_path / "train.log.1").stat().st_ino)  # a restart finds it again
    with open(log, "a") as f:
        f.write("b=1\n")
    writer.write("a=3\n")
    writer.flush()
    assert [(x.text, x.generation) for x in tail.poll(now=3.0)] == [("a=3", 0), ("b=1", 1)]
    assert tail.poll(now=40.0) == [] and tail.rotated is None  # quiet for rotate_wait_s, nobody writing
    writer.close()


def test_a_renamed_log_a_process_still_writes_stays_open(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("a=1\n")
    tail = LogTail(log, rotate_wait_s=30.0)  # the real /proc walk: this test holds it open for writing
    tail.poll(now=0.0)
    with open(log, "a") as writer:
        log.rename(tmp_path / "train.log.1")
        log.write_text("")
        tail.poll(now=1.0)
        assert tail.poll(now=100.0) == [] and tail.rotated is not None
    assert tail.poll(now=200.0) == [] and tail.rotated is None
    assert writer.closed


def test_a_saved_position_whose_fingerprint_differs_is_read_from_the_start(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=1.0\nstep=2 loss=1.0\n")
    first = LogTail(log)
    first.poll()
    saved = first.fingerprint(first.offset)
    log.write_text("step=1 loss=0.5\nstep=2 loss=nan\nstep=3 loss=0.4\n")  # rewritten in place: the same inode
    again = LogTail(log, offset=first.offset, inode=first.inode, fingerprint=saved)
    assert [(x.text, x.generation) for x in again.poll()][:2] == [("step=1 loss=0.5", 1), ("step=2 loss=nan", 1)]
    now = LogTail(log)
    now.poll()
    same = LogTail(log, offset=16, inode=first.inode, fingerprint=now.fingerprint(16))
    assert next(x.text for x in same.poll()) == "step=2 loss=nan"  # it matches: read on from the offset


def test_a_version_2_state_file_loads_and_a_partial_line_round_trips():
    old = json.dumps({"v": 2, "logs": {"r": {"offset": 5, "generation": 1, "inode": 7}}, "control_id": "1-0"})
    assert AgentState.from_json(old).logs["r"] == LogPosition(offset=5, generation=1, inode=7)
    state = AgentState(logs={"r": LogPosition(offset=5, fingerprint="ab", partial=Partial(5, {"step": 6}))})
    assert AgentState.from_json(state.to_json()).logs == state.logs

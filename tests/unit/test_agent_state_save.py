"""The agent's offsets file is written only when what it holds changes (a quiet agent saves every second)."""

from __future__ import annotations

from trainwarden.agent.state import AgentState, LogPosition, load, save


def test_an_unchanged_state_is_not_written_again(tmp_path):
    path = tmp_path / "agent-state.json"
    state = AgentState()
    state.logs["r1"] = LogPosition(offset=10)
    written = save(path, state)
    assert written is not None and path.read_bytes() == written
    path.unlink()
    assert save(path, state, unless=written) == written
    assert not path.exists()  # the same state as the last save: nothing written
    state.logs["r1"] = LogPosition(offset=20)
    assert save(path, state, unless=written) != written
    assert load(path).logs["r1"].offset == 20


def test_without_a_path_nothing_is_written():
    assert save(None, AgentState()) is None

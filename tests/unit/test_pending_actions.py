"""Pending actions are typed records (workers/pending.py) whose stored form is the checkpoint's JSON of
before: old checkpoints read the same, every kind has a performer, an unknown kind is dropped with a reason."""

import json
import logging

import pytest
from trainwarden.workers import pending
from trainwarden.workers.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from trainwarden.workers.errors import UnknownAction
from trainwarden.workers.pending import KINDS, PendingAction, StopRun, from_dict
from trainwarden.workers.performers import PERFORMERS, perform

# The stored form as the workers wrote it before the records existed (workers/evaluate.py's dict literals and
# stop_by_agent's `{**action, "sent": ..., "due": ...}`), byte for byte.
TODAY = (
    '[{"kind": "evidence", "sid": "5-0", "id": "eval/r:3"}, {"kind": "stop", "sid": "6-0", "id": "eval/r:4"}, '
    '{"kind": "stop", "sid": "7-0", "id": "cli/h:1", "sent": 10.5, "due": 100.0}, '
    '{"kind": "resume", "sid": "8-0", "id": "agent/h:9"}, '
    '{"kind": "dump", "sid": "9-0", "id": "eval/r:5", "host": null}, '
    '{"kind": "stacks", "sid": "10-0", "id": "agent/h:10", "pack": "/ev/r/pack"}, '
    '{"kind": "chart", "sid": "11-0", "id": "eval/r:6", "rule": "nan"}]'
)
RECORDS = [
    pending.BuildEvidence(sid="5-0", id="eval/r:3"),
    StopRun(sid="6-0", id="eval/r:4"),
    StopRun(sid="7-0", id="cli/h:1", sent=10.5, due=100.0),
    pending.Resume(sid="8-0", id="agent/h:9"),
    pending.RequestDump(sid="9-0", id="eval/r:5", host=None),
    pending.AddStacks(sid="10-0", id="agent/h:10", pack="/ev/r/pack"),
    pending.ChartAnomaly(sid="11-0", id="eval/r:6", rule="nan"),
]


def test_a_checkpoint_in_todays_form_reads_as_the_records_and_writes_back_the_same_bytes():
    stored = {b"after": b"11-0", b"emitted": b"6", b"policy": b"{}", b"run": b"{}", b"pending": TODAY.encode()}
    cp = decode_checkpoint(stored)
    assert [from_dict(a) for a in cp.pending] == RECORDS
    assert json.dumps([r.to_dict() for r in RECORDS]) == TODAY
    assert encode_checkpoint(Checkpoint(pending=[r.to_dict() for r in RECORDS])).fields["pending"] == TODAY.encode()


def test_every_kind_is_declared_once_and_has_a_performer():
    assert sorted(KINDS) == ["chart", "dump", "evidence", "resume", "stacks", "stop"]
    assert set(PERFORMERS) == set(KINDS.values())
    with pytest.raises(ValueError, match="declared twice"):

        @pending.pending_action
        class Again(PendingAction):
            kind = "stop"


def test_an_unknown_kind_is_refused_with_what_to_do_and_dropped_by_perform(caplog):
    with pytest.raises(UnknownAction, match=r"unknown pending action kind 'teleport' \(known: chart, dump, .*upgrade"):
        from_dict({"kind": "teleport", "sid": "1-0"})
    with caplog.at_level(logging.ERROR):
        assert perform(None, "r", Checkpoint(), {"kind": "teleport", "sid": "1-0"}, now=0.0) is None  # type: ignore[arg-type]
    assert "unknown pending action kind 'teleport'" in caplog.text and "dropping it from r's" in caplog.text


def test_a_stored_action_without_an_id_or_with_keys_it_does_not_declare_still_reads():
    """Older or hand-written entries (tests, `trainwarden` repairs) lack `id`; unknown keys are ignored."""
    assert from_dict({"kind": "stop", "sid": "2-0", "sent": 1.0, "due": 2.0}) == StopRun(sid="2-0", sent=1.0, due=2.0)
    assert StopRun(sid="2-0").to_dict() == {"kind": "stop", "sid": "2-0"}
    assert from_dict({"kind": "evidence", "sid": "1-0", "extra": 1}) == pending.BuildEvidence(sid="1-0")

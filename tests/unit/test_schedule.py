"""When a quiet run is ticked next (pure): never for ended runs, faster in the startup phase."""

import pytest
from trainwarden.events import types as t
from trainwarden.policies.default import default_policy
from trainwarden.workers.checkpoint import Checkpoint
from trainwarden.workers.schedule import TickSettings, next_tick

TICKS = TickSettings(startup_s=60, steady_s=900, max_silence_s=3600)


def checkpoint(*, start=0.0, now=100.0, last_input=100.0, decision=None, status="running", ended=False):
    cp = Checkpoint()
    cp.policy.start, cp.policy.now, cp.policy.last_input = start, now, last_input
    cp.policy.decision, cp.policy.ended = decision, ended
    cp.run.status = status
    return cp


@pytest.mark.parametrize(("cp", "due"), [
    (checkpoint(), 5060.0),  # startup phase: a minute
    (checkpoint(now=2000.0, last_input=2000.0), 5900.0),  # after 30 minutes: 15
    (checkpoint(now=9000.0, last_input=2000.0), None),  # silent for over an hour (max_silence_s)
    (checkpoint(decision=t.STOP), None),
    (checkpoint(status="finished"), None),
    (checkpoint(status="stopping"), None),
    (checkpoint(ended=True), None),
    (Checkpoint(), None),  # nothing evaluated yet
])  # fmt: skip
def test_next_tick(cp, due):
    assert next_tick(cp, default_policy(), TICKS, wall_now=5000.0) == due


def test_a_stop_the_agent_carries_out_is_looked_at_by_its_deadline_even_once_stopping():
    """The worker does not wait for an agent's stop: its tick at the deadline brings a silent agent's run back."""
    cp = checkpoint(decision=t.STOP, status="stopping")
    cp.pending = [{"kind": "evidence", "sid": "1-0"}, {"kind": "stop", "sid": "2-0", "sent": 10.0, "due": 100.0},
                  {"kind": "stop", "sid": "3-0", "sent": 20.0, "due": 90.0}]  # fmt: skip
    assert next_tick(cp, default_policy(), TICKS, wall_now=5000.0) == 90.0

"""Rule state has named fields, and a worker checkpoint written before they had names still works."""

from __future__ import annotations

import json

from trainwarden.events import types as t
from trainwarden.events.projection import RunState
from trainwarden.policies.engine import PolicyState, RuleState
from trainwarden.workers.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint

from tests.policy_helpers import Clock, policy, run, summary

POLICY = """\
  - id: loss-spike
    kind: spike
    metric: loss
    window: 10
    min_samples: 5
    escalate: {decision: STOP, for: 3 samples}
  - {id: gn, kind: threshold, metric: grad_norm, above: 100, for: 3 samples, decision: WAIT, cooldown: 10m}
"""

# PolicyState.to_dict() as the previous version wrote it into the checkpoint (keys k, c, n, esc, open,
# resolved), after 10 healthy samples and 2 bad ones: loss-spike open, gn holding for 2 of its 3 samples.
# The policy hash and the rule digests are this version's, and so is the layout of the kinds' own state
# (`k`); a state in the kinds' earlier layout is the next test's case.
OLD_POLICY_STATE = json.loads("""{"config": {}, "deciding": {}, "decision": "CONTINUE", "dirty": false,
"ended": false, "kept": {}, "last_input": 1800000011.0, "launch_seq": null, "now": 1800000011.0,
"policy": "efd2d28fe58bc06e", "rules": {"gn": {"c": true, "esc": false,
"k": {"metric": "grad_norm", "value": 150.0}, "n": 2, "open": null, "reason": "", "resolved": null,
"sig": "a80d9c31a37e15dd", "since": 1800000010.0, "values": {}}, "loss-spike": {"c": true, "esc": false,
"k": {"baseline": 1.0, "metric": "loss", "sorted_window": [], "window_sum": 10.0, "value": 3.0,
"window": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]}, "n": 2, "open": "p:11",
"reason": "loss=3 is 3x its trailing mean 1", "resolved": null, "sig": "d6a771ccd6391d0a",
"since": 1800000010.0, "values": {"loss": 3.0, "trailing_mean": 1.0}}}, "start": 1800000000.0, "step": null}""")

# The kinds' state in their earlier layout (short keys `w`, `s`, `m`, `v`, `b`) under that layout's digests.
EARLIER_LAYOUT = {
    "sig": "19e1f2023043303a",
    "holding": True,
    "samples": 2,
    "since": 1800000010.0,
    "kind_state": {"b": 1.0, "m": "loss", "o": [], "s": 10.0, "v": 3.0, "w": [1.0] * 10},
}


def _events() -> list:
    c = Clock()
    healthy = [c.metric(i, loss=1.0, grad_norm=1) for i in range(10)]
    return healthy + [c.metric(10 + i, loss=3.0, grad_norm=150) for i in range(3)]


def test_a_checkpoint_with_the_old_rule_keys_continues_exactly_where_it_left_off() -> None:
    pol = policy(POLICY)
    events = _events()
    fresh = PolicyState()
    whole = run(pol, events, fresh)
    assert summary(whole) == ["CONTINUE", "opened:loss-spike", "opened:gn", "STOP:loss-spike"]

    old = Checkpoint(run=RunState())
    fields = encode_checkpoint(old).applied()
    del fields[b"head"]  # the policy state stored whole, as JSON, as before it was stored in parts
    fields[b"policy"] = json.dumps(OLD_POLICY_STATE).encode()
    cp = decode_checkpoint(fields)
    assert cp.policy.policy == pol.hash  # the same policy: no re-application, the windows are kept
    gn = cp.policy.rules["gn"]
    assert (gn.holding, gn.samples, gn.since, gn.opened_by) == (True, 2, 1800000010.0, None)
    assert cp.policy.rules["loss-spike"].opened_by == "p:11"
    assert len(cp.policy.rules["loss-spike"].kind_state["window"]) == 10

    resumed = run(pol, events[12:], cp.policy)
    assert resumed == whole[2:]  # the same outputs, with the same reasons, as if never interrupted
    assert cp.policy == fresh


def test_rule_state_is_saved_under_named_keys() -> None:
    state = PolicyState()
    run(policy(POLICY), _events()[:12], state)
    saved = json.loads(json.dumps(state.to_dict()))
    assert set(saved["rules"]["gn"]) == {"sig", "kind_state", "holding", "since", "samples", "opened_by",
                                         "escalated", "resolved_at", "reason", "values"}  # fmt: skip
    assert PolicyState.from_dict(saved) == state
    assert isinstance(PolicyState.from_dict(saved).rules["gn"], RuleState)
    assert state.decision == t.CONTINUE


def test_a_kind_state_in_an_earlier_layout_starts_its_window_over_instead_of_being_misread() -> None:
    pol = policy(POLICY)
    state = PolicyState.from_dict(json.loads(json.dumps(OLD_POLICY_STATE)))
    state.policy = "c381f1c932532252"  # the hash the earlier version gave this policy
    state.rules["loss-spike"] = RuleState.from_dict(dict(EARLIER_LAYOUT))
    c = Clock()
    c.seq = 13  # after the 13 events of `_events`
    outputs = run(pol, [c.metric(12 + i, loss=1.0, grad_norm=1) for i in range(3)], state)
    spike = state.rules["loss-spike"]
    assert spike.sig == pol.sigs[0]
    assert spike.kind_state["window"] == [1.0, 1.0, 1.0]  # a new window, in this version's layout
    assert "w" not in spike.kind_state
    assert state.policy == pol.hash  # applied again: the hash covers the layout of the kinds' state
    assert not any(typ == t.DECISION and data["decision"] == t.STOP for typ, data in outputs)


def test_to_dict_writes_every_field_and_leaves_out_only_unknown_progress():
    from trainwarden.policies.state import PROGRESS_KEYS

    rs = RuleState(sig="s", kind_state={"w": [1.0]}, since_step=7, since_evals=2, resolved_step=9, resolved_evals=3)
    assert set(rs.to_dict()) == set(RuleState.__slots__)  # a new field must be written too
    assert RuleState.from_dict(rs.to_dict()) == rs
    bare = RuleState(sig="s", kind_state={})
    assert set(bare.to_dict()) == set(RuleState.__slots__) - PROGRESS_KEYS
    assert RuleState.from_dict(bare.to_dict()) == bare

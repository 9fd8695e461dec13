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
# resolved; the policy hash and rule digests are this version's, whose metric vocabulary differs), after
# 10 healthy samples and 2 bad ones: loss-spike open, gn holding for 2 of its 3 samples.
OLD_POLICY_STATE = json.loads("""{"config": {}, "deciding": {}, "decision": "CONTINUE", "dirty": false,
"ended": false, "kept": {}, "last_input": 1800000011.0, "launch_seq": null, "now": 1800000011.0,
"policy": "9063a0142caf0543", "rules": {"gn": {"c": true, "esc": false, "k": {"m": "grad_norm", "v": 150.0},
"n": 2, "open": null, "reason": "", "resolved": null, "sig": "a6b9e0768fa98bd8", "since": 1800000010.0,
"values": {}}, "loss-spike": {"c": true, "esc": false, "k": {"b": 1.0, "m": "loss", "o": [], "s": 10.0,
"v": 3.0, "w": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]}, "n": 2, "open": "p:11",
"reason": "loss=3 is 3x its trailing mean 1", "resolved": null, "sig": "19e1f2023043303a",
"since": 1800000010.0, "values": {"loss": 3.0, "trailing_mean": 1.0}}}, "start": 1800000000.0, "step": null}""")


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
    fields = {k.encode(): v.encode() for k, v in encode_checkpoint(old).items()}
    fields[b"policy"] = json.dumps(OLD_POLICY_STATE).encode()
    cp = decode_checkpoint(fields)
    assert cp.policy.policy == pol.hash  # the same policy: no re-application, the windows are kept
    gn = cp.policy.rules["gn"]
    assert (gn.holding, gn.samples, gn.since, gn.opened_by) == (True, 2, 1800000010.0, None)
    assert cp.policy.rules["loss-spike"].opened_by == "p:11"
    assert len(cp.policy.rules["loss-spike"].kind_state["w"]) == 10

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

"""The stop breaker in Slack, quiet (#38 item 3): fifty held STOPs once posted fifty ANOMALY parents and fifty
STOPs (each then edited to say it was held) beside the one STOP BREAKER message. Now a threshold rule's STOP
waits for its outcome (bot/stop_outcome.py): held, it posts nothing of its own (the STOP BREAKER message lists
it); carried out, it is posted as before; a NaN's STOP is posted at once; with no outcome in time (workers down)
it is posted anyway. Through the local Slack Web API server, with events stamped now (as the workers stamp
them) and the deciding policy recorded as the workers record it (`policy.loaded`)."""

import math
import time

import pytest
from trainwarden.events import breaker
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.policies.loader import load_policy

from tests.helpers import wait_for
from tests.integration.test_slack_notifier import drain, notifier

pytestmark = pytest.mark.redis

RUNS = [f"exp{i:02d}" for i in range(1, 6)]
POLICY = """\
name: mass
rules:
  - id: loss-nonfinite
    kind: nonfinite
    metric: loss
    decision: STOP
    severity: critical
  - id: loss-too-high
    kind: threshold
    metric: loss
    above: 0.001
    decision: STOP
"""


@pytest.fixture
def policy(store):
    """The deciding policy, recorded in the system run as the workers record a load; its hash."""
    digest = load_policy(POLICY, source="mass.yaml").hash
    loaded = {"policy": digest, "name": "mass", "source": "mass.yaml", "text": POLICY}
    store.append([make_event(t.POLICY_LOADED, run=t.SYSTEM_RUN, host="w", producer="policy/w", seq=1, ts=time.time(),
                             data=loaded)])  # fmt: skip
    return digest


class Worker:
    """The events the workers write for a run, stamped now."""

    def __init__(self, store, run):
        self.store, self.run, self.seq = store, run, 0

    def __call__(self, event_type, **data):
        self.seq += 1
        return make_event(event_type, run=self.run, host="worker", producer=f"eval/{self.run}", seq=self.seq,
                          data={"run_host": "gpu1", **data}, ts=time.time())  # fmt: skip

    def decide(self, policy, rule, reason, **values):
        """An evaluation turn: the rule's anomaly opens, the STOP is decided and asked for (one append); both name
        the metric that opened the rule (the opening's `trigger` is the decision's `anomaly`, as policies/engine.py
        writes them)."""
        metric = f"{self.run}-metric-{self.seq}"
        opened = self(t.ANOMALY_OPENED, rule=rule, reason=reason, severity="warning", decision="STOP", values=values,
                      trigger=metric, policy=policy)  # fmt: skip
        decision = self(t.DECISION, decision="STOP", rule=rule, reason=reason, policy=policy, anomaly=metric,
                        trigger=metric, values=values)  # fmt: skip
        request = self(t.STOP_REQUESTED, by="policy", rule=rule, reason=reason, decision=decision.id)
        self.store.append([opened, decision, request])
        return decision, request

    def evidence(self, decision):
        self.store.append([self(t.EVIDENCE_BUILT, path=f"/nonexistent/{self.run}/pack", decision=decision.id)])

    def held(self, decision, request):
        entry = {"request": request.id, "decision": decision.id, "rule": "loss-too-high", "stops": 3, "max_stops": 3,
                 "reason": request.data["reason"], "window_s": 600.0, "run_host": "gpu1"}  # fmt: skip
        breaker.hold(self.store.redis, self.store.keys, self.run, {**entry, "ts": time.time()})
        self.store.append([self(t.STOP_HELD, **entry)])

    def done(self):
        self.store.append([self(t.STOP_DONE, detail=f"killed tmux session train-{self.run}")])


def about(slack_api, run):
    return [m for m in slack_api.messages if run in m.text and not m.text.startswith("STOP BREAKER")]


def test_held_stops_post_only_the_breaker_message_and_a_nan_stop_goes_out_at_once(store, slack_api, policy):
    n = notifier(store, slack_api)
    workers = {run: Worker(store, run) for run in RUNS}
    decided = {run: w.decide(policy, "loss-too-high", "loss=3.1 > 0.001", loss=3.1) for run, w in workers.items()}
    nan = Worker(store, "exp99")
    nan.decide(policy, "loss-nonfinite", "loss=nan at step 1200", loss=math.nan, step=1200)
    drain(n)
    # the NaN's ANOMALY and STOP are posted at once, while the threshold STOPs wait for their outcomes
    assert [m.text.split(" ", 1)[0] for m in about(slack_api, "exp99")] == ["ANOMALY", "STOP"]
    assert all(about(slack_api, run) == [] for run in RUNS)
    for run, w in workers.items():
        w.evidence(decided[run][0])
        w.held(*decided[run])
    drain(n)

    (message,) = [m for m in slack_api.messages if m.text.startswith("STOP BREAKER")]
    assert message.updates[-1].startswith("STOP BREAKER: 5 policy STOPs held")
    assert all(run in message.updates[-1] for run in RUNS)
    assert all(about(slack_api, run) == [] for run in RUNS)  # no ANOMALY, no STOP, no pack for a held run
    assert n.suppressed["held"] == 10  # each held run's anomaly and STOP, in the log and not in the channel
    drain(n)
    assert n.reader.pending() == 0  # the entries that waited are acknowledged once their runs' outcomes are in


def test_a_carried_out_threshold_stop_is_posted_once_its_stop_is_done(store, slack_api, policy):
    n = notifier(store, slack_api)
    w = Worker(store, "exp01")
    w.decide(policy, "loss-too-high", "loss=3.1 > 0.001", loss=3.1)
    drain(n)
    assert about(slack_api, "exp01") == []  # waiting for its outcome
    w.done()
    drain(n)
    assert [m.text.split(" ", 1)[0] for m in about(slack_api, "exp01")] == ["ANOMALY", "STOP", "STOPPED"]
    assert n.reader.pending() == 0


def test_a_stop_with_no_outcome_is_posted_after_the_wait(store, slack_api, policy):
    n = notifier(store, slack_api)
    n.stop_outcome_wait_s = 1.0
    Worker(store, "exp01").decide(policy, "loss-too-high", "loss=3.1 > 0.001", loss=3.1)
    drain(n)
    assert about(slack_api, "exp01") == [] and n.reader.pending() == 1  # its entry stays pending meanwhile
    wait_for(lambda: n.step() >= 0 and len(about(slack_api, "exp01")) == 2, what="posted after the wait", timeout=15)
    assert [m.text.split(" ", 1)[0] for m in about(slack_api, "exp01")] == ["ANOMALY", "STOP"]
    assert n.reader.pending() == 0


def test_a_restarted_notifier_still_posts_a_waiting_stop(store, slack_api, policy):
    first = notifier(store, slack_api)
    first.stop_outcome_wait_s = 1.0
    Worker(store, "exp01").decide(policy, "loss-too-high", "loss=3.1 > 0.001", loss=3.1)
    drain(first)
    assert about(slack_api, "exp01") == []
    again = notifier(store, slack_api)  # same consumer: reads its pending entries first
    again.stop_outcome_wait_s = 1.0
    wait_for(lambda: again.step() >= 0 and len(about(slack_api, "exp01")) == 2, what="posted", timeout=15)


def test_a_one_shot_notifier_posts_a_stop_without_waiting(store, slack_api, policy):
    """`trainwarden bot --burst` posts what is there: it would exit before an outcome came."""
    n = notifier(store, slack_api)
    n.stop_outcome_wait_s = 3600.0
    Worker(store, "exp01").decide(policy, "loss-too-high", "loss=3.1 > 0.001", loss=3.1)
    n.run(burst=True)
    assert [m.text.split(" ", 1)[0] for m in about(slack_api, "exp01")] == ["ANOMALY", "STOP"]

"""Guarded stops (`confirm: 5m` in the policy): the workers' side of the contract with the Slack bot."""

import dataclasses

import pytest
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.loader import load_policy
from trainwarden.workers import context
from trainwarden.workers.policy_source import PolicySource

from tests.helpers import events_of, metric, nan_metric
from tests.ticking import FakeClock, settler

pytestmark = pytest.mark.redis

GUARDED = """\
name: guarded
rules:
  - {id: loss-nonfinite, kind: nonfinite, metric: loss, decision: STOP, confirm: 5m}
"""


@pytest.fixture
def world(store, r, worker_ctx, tmp_path):
    clock = FakeClock(1000.0)
    path = tmp_path / "guarded.yaml"
    path.write_text(GUARDED)
    context.install(dataclasses.replace(worker_ctx, clock=clock, policies=PolicySource(host="w", path=path)))
    settle = settler(store, r, clock, queue_name="tw-guard")

    store.append([make_event(t.RUN_LAUNCHED, run="exp01", host="gpu1", producer="launch", seq=1, ts=1000.0),
                  metric("exp01", 1, step=1, loss=2.0)])  # fmt: skip
    settle()
    store.append([nan_metric("exp01", 2)])
    settle()
    return clock, settle


def stop_decision(store):
    return [e for e in events_of(store, "exp01", t.DECISION) if e.data["decision"] == t.STOP]


def test_the_policy_language_takes_confirm_only_for_stops():
    assert load_policy(GUARDED, source="p.yaml").rules[0].confirm_s == 300
    with pytest.raises(PolicyError) as info:
        load_policy(GUARDED.replace("decision: STOP", "decision: WAIT"), source="p.yaml")
    assert info.value.problems[0].startswith("p.yaml:3:")
    assert "'confirm' applies to rules that decide STOP" in info.value.problems[0]


def test_a_guarded_stop_waits_then_the_workers_stop_the_run_when_nobody_answers(store, r, world):
    clock, settle = world
    (decision,) = stop_decision(store)
    assert decision.data["confirm_s"] == 300
    assert events_of(store, "exp01", t.STOP_REQUESTED) == []  # waiting for a person
    assert events_of(store, "exp01", t.EVIDENCE_BUILT)  # the evidence is built at once
    assert r.zscore(store.keys.schedule(), "exp01") == decision.ts + 300  # looked at again at the deadline
    clock.now = decision.ts + 299
    settle()
    assert events_of(store, "exp01", t.STOP_REQUESTED) == []
    clock.now = decision.ts + 301
    settle()
    (request,) = events_of(store, "exp01", t.STOP_REQUESTED)
    assert request.data["by"] == "policy" and request.data["decision"] == decision.id
    assert request.data["reason"].startswith("no answer within 5m: loss=nan")
    assert events_of(store, "exp01", t.STOP_FAILED) or events_of(store, "exp01", t.STOP_DONE)  # it tried to stop
    clock.now += 3600
    settle()
    assert len(events_of(store, "exp01", t.STOP_REQUESTED)) == 1


def test_stop_now_stops_at_once(store, r, world):
    clock, settle = world
    (decision,) = stop_decision(store)
    store.append(
        [
            make_event(
                t.STOP_REQUESTED,
                run="exp01",
                host="bot",
                producer="slack/bot",
                seq=1,
                ts=clock.now,
                data={"by": "slack", "user": "U1", "reason": "Stop now", "decision": decision.id},
            )
        ]
    )
    settle()
    assert len(events_of(store, "exp01", t.STOP_REQUESTED)) == 1
    clock.now = decision.ts + 400
    settle()
    assert len(events_of(store, "exp01", t.STOP_REQUESTED)) == 1  # the guard was settled: no second request


def test_keep_running_cancels_the_stop_and_silences_the_rule_until_then(store, r, world):
    clock, settle = world
    (decision,) = stop_decision(store)
    until = decision.ts + 3600
    store.append([make_event(t.STOP_CANCELLED, run="exp01", host="bot", producer="slack/bot", seq=1, ts=clock.now,
                             data={"by": "slack", "user": "U1", "rule": "loss-nonfinite", "decision": decision.id,
                                   "until": until})])  # fmt: skip
    settle()
    after = events_of(store, "exp01", t.DECISION)[-1]
    assert after.data["decision"] == t.CONTINUE
    assert after.data["reason"].startswith("kept running by U1 (loss-nonfinite may not stop it again until")
    clock.now = decision.ts + 400
    store.append([nan_metric("exp01", 3)])
    settle()
    assert events_of(store, "exp01", t.STOP_REQUESTED) == []  # no deadline stop, no new STOP while kept
    assert len(stop_decision(store)) == 1
    clock.now = until + 1
    store.append([nan_metric("exp01", 4)])  # still NaN after the hour: it may STOP again (guarded again)
    settle()
    assert len(stop_decision(store)) == 2

"""The stop breaker's state in the worker, on a real Redis (events/breaker.py, workers/breaker.py): a held run that
ends or whose STOP a person cancels leaves the held list; a rule the first policy brought is known, one a reload
brings is new; the count of running runs is kept a few seconds, for every worker."""

import dataclasses

import pytest
from trainwarden.events import breaker
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.policies.loader import load_policy
from trainwarden.workers import context
from trainwarden.workers.breaker import running
from trainwarden.workers.config import BreakerSettings
from trainwarden.workers.policy_source import PolicySource
from trainwarden.workers.process import process_run

from tests.helpers import events_of, metric

pytestmark = pytest.mark.redis

POLICY = """\
name: p
rules:
  - {id: loss-too-high, kind: threshold, metric: loss, above: 1, decision: STOP}
"""


@pytest.fixture
def one_stop(worker_ctx):
    """A breaker that carries out one policy STOP and holds the rest; no share, no grace."""
    ctx = dataclasses.replace(worker_ctx, policies=PolicySource(host="w", policy=load_policy(POLICY, source="p.yaml")),
                              breaker=BreakerSettings(max_stops=1, max_share=0.0, new_rule_grace_s=0.0))  # fmt: skip
    context.install(ctx)
    return ctx


def test_a_held_run_that_ends_or_whose_stop_is_cancelled_leaves_the_held_list(store, r, one_stop):
    for run in ("a", "b", "c"):
        store.append([metric(run, 1, step=1, loss=2.0)])
        process_run(run, [])
    assert set(breaker.held_stops(r, store.keys)) == {"b", "c"}
    store.append([make_event(t.RUN_FINISHED, run="b", host="gpu1", producer="gpu1/run/b", seq=1,
                             data={"exit_code": 0})])  # fmt: skip
    process_run("b", [])
    assert set(breaker.held_stops(r, store.keys)) == {"c"}
    (held,) = events_of(store, "c", t.STOP_HELD)
    store.append([make_event(t.STOP_CANCELLED, run="c", host="bot", producer="slack/bot", seq=1,
                             data={"by": "slack", "user": "U1", "rule": "loss-too-high", "until": held.ts + 3600,
                                   "decision": held.data["decision"]})])  # fmt: skip
    process_run("c", [])
    assert breaker.held_stops(r, store.keys) == {}


def test_the_first_policys_rules_are_known_and_a_reloads_new_ones_are_first_loaded_then(store, r):
    breaker.note_rules(r, store.keys, ["old1", "old2"], now=1000.0)
    assert breaker.first_loaded(r, store.keys, "old1") == 0.0  # the baseline: known since before
    breaker.note_rules(r, store.keys, ["old1", "new1"], now=2000.0)
    breaker.note_rules(r, store.keys, ["new1"], now=3000.0)  # loaded again later: its first load stays
    assert breaker.first_loaded(r, store.keys, "old1") == 0.0
    assert breaker.first_loaded(r, store.keys, "new1") == 2000.0
    assert breaker.first_loaded(r, store.keys, "never") is None


def test_the_running_runs_are_counted_once_and_kept_for_every_worker(store, r, one_stop):
    store.append([metric(f"run{i}", 1, step=1, loss=0.5) for i in range(4)])
    store.append([make_event(t.RUN_FINISHED, run="run3", host="gpu1", producer="gpu1/run/run3", seq=2,
                             ts=1002.0, data={"exit_code": 0}),
                  make_event(t.METRIC, run="gone", host="gpu1", producer="gpu1/log/gone/g0", seq=1,
                             ts=1000.0 - 2 * 86_400, data={"step": 1, "loss": 0.5})])  # fmt: skip
    assert running(one_stop, now=2000.0) == 3  # run3 is over; `gone` (its agent lost) was silent for days
    store.append([metric("run9", 1, step=1, loss=0.5)])
    assert running(one_stop, now=2000.0) == 3  # kept, not counted again at each STOP
    assert breaker.running_cached(r, store.keys) == 3

"""A policy edit with a wrong threshold (`above: 0.001` meant as 1000), reloaded by SIGHUP, once stopped every
healthy run within a minute: fifty evidence packs, fifty stops, no brake. The stop breaker (workers/breaker.py)
carries out at most `max_stops` policy STOPs (or `max_share` of the running runs, when more) within its window
and holds the rest for a person; a rule first loaded within `new_rule_grace_s` stops no healthy run at all; a
NaN, a fault of one run, is never held.

Real redis-server; the dispatcher and the worker as processes; fifty synthetic runs whose metrics are appended
to the real event log (as their agents would).
"""

import math
import os
import signal
import time

import pytest
import yaml
from trainwarden.events import breaker
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event

from tests.conftest import spawn, stop_process
from tests.faults.test_sighup import said
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis]

RUNS = [f"exp{i:02d}" for i in range(50)]
MAX_STOPS = 3
MAX_SHARE = 0.1
LIMIT = 5  # 10% of the 50 running runs is more than 3

POLICY = """\
name: {name}
rules:
  - id: loss-nonfinite
    kind: nonfinite
    metric: loss
    decision: STOP
    severity: critical
  - id: loss-too-high
    kind: threshold
    metric: loss
    above: {above}
    decision: STOP
    severity: critical
"""
NEW_RULE = """\
  - id: loss-way-off
    kind: threshold
    metric: loss
    above: 0.001
    decision: STOP
"""


def metric_now(run, seq, **values):
    """A metric stamped now, as an agent stamps it: the share counts the runs active within a day of the newest
    event, and the workers' stops are stamped now."""
    return make_event(t.METRIC, run=run, host="gpu1", producer=f"gpu1/log/{run}/g0", seq=seq, data=values,
                      ts=time.time())  # fmt: skip


def outcomes(store, runs):
    """Each run's stop outcome so far: stop.done / stop.failed (carried out) or stop.held."""
    found = {}
    for run in runs:
        for event in events_of(store, run):
            if event.type in (t.STOP_DONE, t.STOP_FAILED, t.STOP_HELD):
                found[run] = event.type
    return found


def settled_all(store, runs, *, held=True):
    """`outcomes` once every run in `runs` has one (`held`: stop.held counts as one); else None."""
    found = outcomes(store, runs)
    done = [run for run, kind in found.items() if held or kind != t.STOP_HELD]
    return found if len(done) == len(runs) else None


def configure(tmp_path, settings_file, breaker_settings):
    """The sane policy and `breaker_settings` in the settings file; the policy file's path."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(name="sane", above=1000))
    settings = yaml.safe_load(settings_file.read_text())
    settings["policy"] = str(policy)
    settings["workers"]["breaker"] = breaker_settings
    settings_file.write_text(yaml.safe_dump(settings))
    return policy


def test_a_wrong_threshold_reloaded_by_sighup_stops_at_most_its_limit_of_runs_and_holds_the_rest(
    store, r, tmp_path, settings_file
):
    # no new-rule grace here: the edited rule's STOPs are held by the count alone
    policy = configure(tmp_path, settings_file, {"max_stops": MAX_STOPS, "max_share": MAX_SHARE, "window_s": "10m",
                                                 "new_rule_grace_s": 0})  # fmt: skip
    worker_log = tmp_path / "worker.log"
    worker = spawn(settings_file, worker_log, "worker")
    dispatcher = spawn(settings_file, tmp_path / "dispatcher.log", "dispatcher")
    try:
        store.append([metric_now(run, 1, step=1, loss=2.0) for run in RUNS])
        wait_for(lambda: all(events_of(store, run, t.POLICY_APPLIED) for run in RUNS), timeout=60,
                 what="every run evaluated by the sane policy")  # fmt: skip
        policy.write_text(POLICY.format(name="wrong", above=0.001))
        os.kill(worker.pid, signal.SIGHUP)
        (reloaded,) = said(worker_log, "SIGHUP: worker reloaded policy wrong")
        store.append([metric_now(run, 2, step=2, loss=1.9) for run in RUNS])
        settled = wait_for(lambda: settled_all(store, RUNS), timeout=120, what="every run's STOP carried out or held")
        # a NaN now, with the breaker tripped: a fault of one run is stopped at once, a held run's too
        held = sorted(run for run, kind in settled.items() if kind == t.STOP_HELD)
        store.append([metric_now("nan01", 1, step=1, loss=math.nan), metric_now(held[0], 3, step=3, loss=math.nan)])
        faults = wait_for(lambda: settled_all(store, ["nan01", held[0]], held=False), timeout=60,
                          what="the NaN runs' stops carried out")  # fmt: skip
    finally:
        stop_process(dispatcher)
        stop_process(worker)
        print(worker_log.read_text(errors="replace")[-3000:])
    carried_out = [run for run, kind in settled.items() if kind != t.STOP_HELD]
    print(f"mass stop: {len(carried_out)} stops carried out, {len(held)} held, of {len(RUNS)} runs")
    # at the reload, a backtest of the new policy said what it would do
    assert f"a backtest over the {len(RUNS)} running run(s) stops {len(RUNS)} now (exp00, " in reloaded, reloaded
    assert len(carried_out) == LIMIT, carried_out  # the share of the 50 running runs, not max_stops alone
    assert len(held) == len(RUNS) - LIMIT
    assert set(breaker.held_stops(r, store.keys)) == set(held) - {held[0]}  # its NaN stop settled it
    assert set(faults) == {"nan01", held[0]}
    example = events_of(store, held[1], t.STOP_HELD)[0]
    assert example.data["rule"] == "loss-too-high" and example.data["max_stops"] == MAX_STOPS
    assert (example.data["limit"], example.data["stops"]) == (LIMIT, LIMIT)


def test_a_new_wrong_rule_reloaded_by_sighup_stops_no_healthy_run_and_a_nan_is_stopped_at_once(
    store, r, tmp_path, settings_file
):
    runs = RUNS[:6]
    policy = configure(tmp_path, settings_file, {"max_stops": MAX_STOPS, "new_rule_grace_s": "10m"})
    worker_log = tmp_path / "worker.log"
    worker = spawn(settings_file, worker_log, "worker")
    dispatcher = spawn(settings_file, tmp_path / "dispatcher.log", "dispatcher")
    try:
        store.append([metric_now(run, 1, step=1, loss=2.0) for run in runs])
        wait_for(lambda: all(events_of(store, run, t.POLICY_APPLIED) for run in runs), timeout=60,
                 what="every run evaluated by the sane policy")  # fmt: skip
        policy.write_text(POLICY.format(name="new-rule", above=1000) + NEW_RULE)
        os.kill(worker.pid, signal.SIGHUP)
        said(worker_log, "SIGHUP: worker reloaded policy new-rule")
        store.append([metric_now(runs[0], 2, step=2, loss=1.9)])  # the new rule's very first STOP
        first = wait_for(lambda: settled_all(store, runs[:1]), timeout=60, what="the first STOP carried out or held")
        store.append([metric_now(run, 2, step=2, loss=1.9) for run in runs[1:]])
        settled = wait_for(lambda: settled_all(store, runs), timeout=60, what="every run's STOP carried out or held")
        store.append([metric_now("nan01", 1, step=1, loss=math.nan)])
        fault = wait_for(lambda: settled_all(store, ["nan01"], held=False), timeout=60,
                         what="the NaN run's stop carried out")  # fmt: skip
    finally:
        stop_process(dispatcher)
        stop_process(worker)
        print(worker_log.read_text(errors="replace")[-3000:])
    assert first == {runs[0]: t.STOP_HELD}  # under max_stops, and held all the same
    assert settled == dict.fromkeys(runs, t.STOP_HELD)  # 0 carried out
    assert set(breaker.held_stops(r, store.keys)) == set(runs)
    assert fault["nan01"] in (t.STOP_DONE, t.STOP_FAILED)
    example = events_of(store, runs[0], t.STOP_HELD)[0]
    assert example.data["rule"] == "loss-way-off" and example.data["stops"] == 0
    assert 0 <= example.data["new_rule_s"] < example.data["grace_s"] == 600

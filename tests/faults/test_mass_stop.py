"""A policy edit with a wrong threshold (`above: 0.001` meant as 1000), reloaded by SIGHUP, once stopped every
healthy run within a minute: fifty evidence packs, fifty stops, no brake. The stop breaker (workers/breaker.py)
carries out at most `max_stops` policy STOPs within its window and holds the rest for a person; a NaN, a
fault of one run, is never held.

Real redis-server; the dispatcher and the worker as processes; fifty synthetic runs whose metrics are appended
to the real event log (as their agents would).
"""

import os
import signal

import pytest
import yaml
from trainwarden.events import breaker
from trainwarden.events import types as t

from tests.conftest import spawn, stop_process
from tests.faults.test_sighup import said
from tests.helpers import events_of, metric, nan_metric, wait_for

pytestmark = [pytest.mark.redis]

RUNS = [f"exp{i:02d}" for i in range(50)]
MAX_STOPS = 3

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


def test_a_wrong_threshold_reloaded_by_sighup_stops_at_most_max_stops_runs_and_holds_the_rest(
    store, r, tmp_path, settings_file
):
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(name="sane", above=1000))
    settings = yaml.safe_load(settings_file.read_text())
    settings["policy"] = str(policy)
    settings["workers"]["breaker"] = {"max_stops": MAX_STOPS, "window_s": "10m"}
    settings_file.write_text(yaml.safe_dump(settings))
    worker_log = tmp_path / "worker.log"
    worker = spawn(settings_file, worker_log, "worker")
    dispatcher = spawn(settings_file, tmp_path / "dispatcher.log", "dispatcher")
    try:
        store.append([metric(run, 1, step=1, loss=2.0) for run in RUNS])
        wait_for(lambda: all(events_of(store, run, t.POLICY_APPLIED) for run in RUNS), timeout=60,
                 what="every run evaluated by the sane policy")  # fmt: skip
        policy.write_text(POLICY.format(name="wrong", above=0.001))
        os.kill(worker.pid, signal.SIGHUP)
        (reloaded,) = said(worker_log, "SIGHUP: worker reloaded policy wrong")
        store.append([metric(run, 2, step=2, loss=1.9) for run in RUNS])
        settled = wait_for(lambda: settled_all(store, RUNS), timeout=120, what="every run's STOP carried out or held")
        # a NaN now, with the breaker tripped: a fault of one run is stopped at once, a held run's too
        held = sorted(run for run, kind in settled.items() if kind == t.STOP_HELD)
        store.append([nan_metric("nan01", 1), nan_metric(held[0], 3)])
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
    assert len(carried_out) <= MAX_STOPS, carried_out
    assert len(held) == len(RUNS) - len(carried_out)
    assert set(breaker.held_stops(r, store.keys)) == set(held)  # the list a person releases or cancels
    assert set(faults) == {"nan01", held[0]}
    example = events_of(store, held[0], t.STOP_HELD)[0]
    assert example.data["rule"] == "loss-too-high" and example.data["max_stops"] == MAX_STOPS

"""Which plan governs an experiment, and what it says when it holds one back (pure: folded events)."""

import time

from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.projection import fold
from trainwarden.remote.plan import fold_plan
from trainwarden.remote.plan_gate import governing, plan_hold, plan_refusal

EDGES = {"exp1": [], "exp2": ["exp1"], "exp3": ["exp2"], "exp4": ["exp2"]}


def plan_events(name, ts, *steps):
    stream = f"plan-{name}"
    data = {"plan": name, "experiments": list(EDGES), "depends_on": EDGES, "source": "p.yaml"}
    started = make_event(t.PLAN_STARTED, run=stream, host="ctl", producer="plan/ctl", seq=int(ts * 1e6), ts=ts,
                         data=data)  # fmt: skip
    return [started, *(make_event(t.PLAN_STEP, run=stream, host="ctl", producer="plan/ctl", seq=int((ts + i) * 1e6),
                                  ts=ts + i, data={"plan": name, "experiment": exp, "state": state, **extra})
                       for i, (exp, state, extra) in enumerate(steps, start=1))]  # fmt: skip


def run_events(run, seq, *types_data):
    return [make_event(kind, run=run, host="gpu1", producer="test", seq=seq + i, data=data)
            for i, (kind, data) in enumerate(types_data)]  # fmt: skip


def test_a_parent_stopped_by_a_rule_blocks_its_children_with_that_rule():
    t0 = time.time() - 100
    state = fold_plan(plan_events("P", t0, ("exp1", "finished", {}),
                                  ("exp2", "running", {"launch_seq": int(t0 * 1e6) + 5}),
                                  ("exp2", "stopped", {})))  # fmt: skip
    exp2 = fold(run_events("exp2", int(t0 * 1e6) + 5, (t.RUN_LAUNCHED, {"server": "gpu1"}),
                           (t.STOP_REQUESTED, {"by": "policy", "rule": "nan-loss", "reason": "loss=nan"})))  # fmt: skip
    hold = plan_hold("exp3", "P", state, {"exp2": exp2})
    assert hold is not None and hold.blocked
    assert plan_refusal(hold, "trainwarden launch exp3 --force") == (
        "exp3 is blocked in plan P: exp2 was stopped by nan-loss; fix exp2 and run the plan again, or "
        "`trainwarden launch exp3 --force` to launch outside the plan")  # fmt: skip


def test_a_parent_the_plan_saw_running_that_finished_since_holds_nothing():
    t0 = time.time() - 100
    seq = int(t0 * 1e6) + 5
    state = fold_plan(plan_events("P", t0, ("exp1", "finished", {}), ("exp2", "running", {"launch_seq": seq})))
    running = run_events("exp2", seq, (t.RUN_LAUNCHED, {"server": "gpu1"}))
    assert plan_hold("exp3", "P", state, {"exp2": fold(running)}).parent_state == "running"
    done = fold([*running, *run_events("exp2", seq, (t.RUN_FINISHED, {"exit_code": 0, "attempt": 1, "launch": seq}))])
    assert plan_hold("exp3", "P", state, {"exp2": done}) is None
    assert plan_hold("exp2", "P", state, {}) is None  # the plan launched it: not held


def test_the_newest_plan_listing_an_experiment_governs():
    t0 = time.time() - 100
    old = fold_plan(plan_events("old", t0, ("exp1", "failed", {}), ("exp2", "blocked", {"reason": "exp1 failed"})))
    new = fold_plan(plan_events("new", t0 + 50))
    assert governing("exp2", {"old": old, "new": new}) == "new"
    assert governing("exp9", {"old": old}) is None
    hold = plan_hold("exp2", "new", new, {})
    assert hold is not None and not hold.blocked
    assert plan_refusal(hold, "/launch exp2 --force") == (
        "exp2 waits for exp1 in plan new (exp1 is pending); wait, or `/launch exp2 --force` to launch outside the plan"
    )

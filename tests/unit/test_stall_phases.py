"""The stall kind's phases: an eval, a save and the first step each have a budget of their own, the alert says the
phase and how long, a stall that ends says how long it lasted, and a STOP sooner than the collective timeout is
refused at load unless the policy asks for it."""

from __future__ import annotations

import pytest
from trainwarden.bot.messages import anomaly_resolved
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.policies.default import default_policy
from trainwarden.policies.errors import PolicyError

from tests.policy_helpers import Clock, policy, run, summary

POLICY = default_policy()


def steps(c: Clock, n: int, every: float, start: float = 0.0, first: int = 1) -> list:
    return [c.metric(start + i * every, step=first + i, loss=0.7 - 0.001 * i) for i in range(n)]


def idle(c: Clock, start: float, end: float, cpu: float = 0.0) -> list:
    return [c.event(t.HEALTH, at, alive=True, pid=42, processes=2, rss_mb=1.0, cpu_pct=cpu)
            for at in range(int(start), int(end) + 1, 10)]  # fmt: skip


def phase(c: Clock, at: float, name: str, started: bool = True) -> object:
    return c.event(t.PHASE, at, phase=name, started=started, line=f"{name} line")


def opened(out: list) -> dict[str, str]:
    return {d["rule"]: d["reason"] for typ, d in out if typ == t.ANOMALY_OPENED}


def test_an_eval_gets_five_times_the_runs_usual_eval_and_says_so():
    # steps every second; two evals of 40 s each (learned), then a third that hangs
    c = Clock()
    events = steps(c, 5, 1.0)
    at = 10.0
    for k in range(2):
        events += [
            phase(c, at, "eval"),
            c.metric(at + 40, step=5 + k, val_loss=0.5),
            *steps(c, 3, 1.0, at + 41, 6 + 3 * k),
        ]
        at += 50
    events.append(phase(c, at, "eval"))
    quiet = run(POLICY, [*events, *idle(c, at + 10, at + 190)])  # 3 minutes in eval, idle: within 5 x 40 s
    assert "run-stalled" not in opened(quiet)
    out = run(POLICY, [*events, *idle(c, at + 10, at + 420)])
    assert opened(out)["run-stalled"].startswith(
        "no progress for 3m20s in eval (evals took 40s before; its budget is 3m20s)"
    )


def test_the_first_eval_gets_the_collective_timeout_not_the_step_floor():
    c = Clock()
    events = [*steps(c, 5, 1.0), phase(c, 10.0, "eval")]
    assert "run-stalled" not in opened(run(POLICY, [*events, *idle(c, 20, 540)]))  # 9 idle minutes in eval
    out = run(POLICY, [*events, *idle(c, 20, 620)])
    assert opened(out)["run-stalled"].startswith(
        "no progress for 10m in eval (the run's first eval; its budget is 10m)"
    )


def test_a_save_has_its_own_budget_and_a_step_after_it_resolves_the_stall_with_its_length():
    c = Clock()
    events = [*steps(c, 5, 1.0), phase(c, 10.0, "save")]
    assert "run-stalled" not in opened(run(POLICY, [*events, *idle(c, 20, 14 * 60)]))  # 14 minutes saving
    events += idle(c, 20, 16 * 60 + 10)
    out = run(POLICY, events)
    assert opened(out)["run-stalled"] == "saving a checkpoint for 15m (budget 15m); its processes use 0% of a core: " \
        "hung, waiting on something (a lock, a collective, a read)"  # fmt: skip
    out = run(POLICY, [*events, *steps(c, 1, 1.0, start=1010.0, first=6)])
    resolved = [d for typ, d in out if typ == t.ANOMALY_RESOLVED]
    assert resolved[0]["reason"] == "steps again after 16m40s stalled in a checkpoint save"
    event = make_event(t.ANOMALY_RESOLVED, run="r", host="gpu1", producer="w", seq=1, data=resolved[0])
    assert "run-stalled resolved: steps again after 16m40s stalled in a checkpoint save." in anomaly_resolved(event)


def test_a_save_that_ends_gives_the_steps_their_own_budget_again():
    c = Clock()
    events = [*steps(c, 5, 1.0), phase(c, 10.0, "save"), phase(c, 500.0, "save", started=False)]
    out = run(POLICY, [*events, *idle(c, 510, 600)])  # 100 s idle after the save ended: under the 2m floor
    assert "run-stalled" not in opened(out)
    out = run(POLICY, [*events, *idle(c, 510, 630)])
    assert opened(out)["run-stalled"].startswith("no training step for 2m after step 5")


def test_the_first_step_has_its_own_budget_worded_as_start_up_and_one_alert_says_it():
    c = Clock()
    start = [c.event(t.RUN_STARTED, 0.0, pid=42)]
    assert "run-stalled" not in opened(run(POLICY, [*start, *idle(c, 10, 19 * 60)]))
    out = run(POLICY, [*start, *idle(c, 10, 20 * 60 + 10)])
    assert opened(out)["run-stalled"].startswith(
        "no first training step for 20m after start: still loading data or compiling?"
    )
    assert [r for r in opened(out) if "loss" in r and "start" in r] == []  # no-loss-at-start no longer doubles it
    out = run(POLICY, [*start, *idle(c, 10, 20 * 60 + 10), *steps(c, 1, 1.0, start=1500.0)])
    resolved = [d["reason"] for typ, d in out if typ == t.ANOMALY_RESOLVED and d["rule"] == "run-stalled"]
    assert resolved == ["steps again after 25m stalled in start-up"]


def test_an_eval_result_ends_the_eval_so_the_time_after_it_is_judged_as_steps():
    c = Clock()
    events = [*steps(c, 5, 1.0), phase(c, 10.0, "eval"), c.metric(30.0, step=5, val_loss=0.4)]
    out = run(POLICY, [*events, *idle(c, 40, 160)])
    assert opened(out)["run-stalled"].startswith("no training step for 2m after step 5")


def test_a_phase_can_be_tuned_per_rule():
    pol = policy("  - {id: s, kind: stall, save_budget: 1m, eval_factor: 2, eval_floor: 10s}\n")
    c = Clock()
    events = [*steps(c, 5, 1.0), phase(c, 10.0, "save")]
    assert opened(run(pol, [*events, *idle(c, 20, 80)]))["s"].startswith("saving a checkpoint for 1m")
    c = Clock()
    events = [*steps(c, 5, 1.0), phase(c, 10.0, "eval"), *steps(c, 1, 1.0, 30.0, 6), phase(c, 40.0, "eval")]
    assert opened(run(pol, [*events, *idle(c, 50, 90)]))["s"].startswith("no progress for 40s in eval (evals took 20s")


@pytest.mark.parametrize(
    ("extra", "named", "column"),
    [("", "floor 2m", 36), (", floor: 10m, busy_floor: 10m, eval_floor: 5m", "eval_floor 5m", 96)],
)
def test_a_stop_sooner_than_the_collective_timeout_is_refused_at_load(extra: str, named: str, column: int):
    with pytest.raises(PolicyError) as err:
        policy(f"  - {{id: s, kind: stall, decision: STOP, confirm: 5m{extra}}}\n")
    said = str(err.value)
    assert f"test.yaml:4:{column}" in said  # the budget's own value, or the rule when it is a default
    assert f"would stop after {named}, sooner than PyTorch's collective timeout (10m)" in said
    assert "allow_early_stop: true" in said


def test_a_stop_at_or_after_the_collective_timeout_or_asked_early_loads():
    ok = "floor: 10m, busy_floor: 10m, eval_floor: 10m, save_budget: 15m, first_step_budget: 20m"
    assert policy(f"  - {{id: s, kind: stall, decision: STOP, confirm: 5m, {ok}}}\n").rules[0].decision == t.STOP
    early = policy("  - {id: s, kind: stall, decision: STOP, allow_early_stop: true}\n")
    c = Clock()
    out = run(early, [*steps(c, 5, 1.0), *idle(c, 10, 140)])
    assert "STOP:s" in summary(out)
    assert policy("  - {id: s, kind: stall, decision: WAIT, floor: 1m}\n").rules[0].decision == t.WAIT


def test_no_first_step_alert_for_a_dead_run_or_one_that_reports_evals_only():
    c = Clock()
    dead = [c.event(t.RUN_STARTED, 0.0, pid=42), c.event(t.HEALTH, 60.0, alive=False), c.tick(25 * 60)]
    assert "run-stalled" not in opened(run(POLICY, dead))
    evals_only = [c.event(t.RUN_STARTED, 0.0, pid=42), c.metric(300.0, step=1, val_loss=2.0), c.tick(25 * 60)]
    assert "run-stalled" not in opened(run(POLICY, evals_only))


def test_a_stall_ended_by_an_eval_says_so_not_steps_again():
    c = Clock()
    events = [*steps(c, 5, 1.0), *idle(c, 10, 140), phase(c, 150.0, "eval")]
    out = run(POLICY, events)
    assert opened(out)["run-stalled"].startswith("no training step for 2m06s after step 5")
    resolved = [d["reason"] for typ, d in out if typ == t.ANOMALY_RESOLVED]
    assert resolved == ["an eval began after 2m26s stalled in training"]


def test_an_eval_line_that_says_it_is_done_ends_the_eval_stall():
    c = Clock()
    events = [*steps(c, 5, 1.0), phase(c, 10.0, "eval"), *idle(c, 20, 620), phase(c, 700.0, "eval", started=False)]
    out = run(POLICY, events)
    assert opened(out)["run-stalled"].startswith("no progress for 10m in eval")
    resolved = [d["reason"] for typ, d in out if typ == t.ANOMALY_RESOLVED]
    assert resolved == ["the eval finished after 11m30s stalled in eval"]

"""The stall kind and the default policy's run-stalled: a run whose steps stopped coming, against its own cadence,
said with what its processes do; slow steps, evals and the start-up are no stall."""

from __future__ import annotations

import pytest
from trainwarden.events import types as t
from trainwarden.policies.default import default_policy
from trainwarden.policies.errors import PolicyError

from tests.policy_helpers import Clock, policy, run, summary

POLICY = default_policy()


def sample(c: Clock, at: float, cpu: float) -> object:
    return c.event(t.HEALTH, at, alive=True, pid=42, processes=3, rss_mb=512.0, cpu_pct=cpu)


def steps(c: Clock, n: int, every: float, start: float = 0.0, first: int = 1) -> list:
    return [c.metric(start + i * every, step=first + i, loss=0.7 - 0.001 * i) for i in range(n)]


def opened(out: list) -> dict[str, str]:
    return {d["rule"]: d["reason"] for typ, d in out if typ == t.ANOMALY_OPENED}


def test_a_deadlocked_loop_is_said_hung_at_its_budget_not_before():
    c = Clock()
    events = steps(c, 10, 0.1) + [sample(c, 1.0 + 10 * k, 0.0) for k in range(1, 12)]  # samples to 111 s
    assert "run-stalled" not in opened(run(POLICY, events))  # 110 s of silence: under the 2m floor
    c2 = Clock()
    events = steps(c2, 10, 0.1) + [sample(c2, 1.0 + 10 * k, 0.0) for k in range(1, 14)]  # to 131 s
    out = run(POLICY, events)
    reason = opened(out)["run-stalled"]
    assert reason.startswith("no training step for 2m") and "after step 10" in reason
    assert "steps came every 100ms" in reason and "hung" in reason
    assert "WAIT:run-stalled" in summary(out)  # never a STOP by default


def test_a_busy_silence_is_given_the_collective_timeout_then_said_busy_and_the_next_step_resolves_it():
    # steps every 30 s, then 9 minutes at 99.5% CPU (a long eval or save): no alarm
    c = Clock()
    events = steps(c, 5, 30.0) + [sample(c, 120.0 + 60 * k, 99.5) for k in range(1, 10)]  # to 660 s
    assert "run-stalled" not in opened(run(POLICY, events))
    events += [sample(c, 120.0 + 60 * k, 99.5) for k in range(10, 12)]  # to 780 s: 11 minutes
    events += steps(c, 1, 1.0, start=800.0, first=6)
    out = run(POLICY, events)
    assert "no training step for 10m" in opened(out)["run-stalled"]
    assert "busy (99.5% CPU)" in opened(out)["run-stalled"]
    assert "resolved:run-stalled" in summary(out)


def test_slow_steps_set_a_longer_budget():
    # a step every 5 minutes: 15 minutes of silence is the budget, 12 are not a stall
    c = Clock()
    events = steps(c, 6, 300.0) + [sample(c, 1500.0 + 60 * k, 0.0) for k in range(1, 13)]  # silent 12 min
    assert "run-stalled" not in opened(run(POLICY, events))
    events += [sample(c, 1500.0 + 60 * k, 0.0) for k in range(13, 17)]  # 16 min
    assert "no training step for 15m" in opened(run(POLICY, events))["run-stalled"]


def test_evals_are_no_steps_and_the_start_up_is_not_judged():
    c = Clock()
    two = steps(c, 2, 1.0)  # two steps only: the start-up rules speak, not this one
    assert "run-stalled" not in opened(run(POLICY, [*two, sample(c, 500.0, 0.0)]))
    c = Clock()
    events = steps(c, 5, 1.0) + [c.metric(60.0 + 30 * k, step=5, val_loss=0.5) for k in range(4)]
    events.append(sample(c, 126.0, 0.0))
    assert "run-stalled" in opened(run(POLICY, events))  # evals at step 5 are no training progress


def test_its_parameters_are_checked():
    pol = policy("  - {id: s, kind: stall, floor: 30s, factor: 2, min_steps: 2}\n")
    c = Clock()
    out = run(pol, [*steps(c, 3, 1.0), sample(c, 40.0, 0.0)])
    assert opened(out)["s"].startswith("no training step for 38s after step 3")
    with pytest.raises(PolicyError, match="factor"):
        policy("  - {id: s, kind: stall, factor: 0.5}\n")


def test_where_a_hung_run_waits_is_said_in_words():
    c = Clock()
    events = [*steps(c, 10, 0.1), c.event(t.HEALTH, 125.0, alive=True, pid=42, processes=2, rss_mb=1.0, cpu_pct=0.0,
                                          waiting="futex_do_wait")]  # fmt: skip
    reason = opened(run(POLICY, events))["run-stalled"]
    assert reason.endswith("hung, waiting on a lock or a condition (a futex) (the kernel's futex_do_wait)")

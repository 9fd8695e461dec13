"""A 4-experiment plan (E1 -> E2 -> {E3, E4}) on 2 GPUs of a server reached over real SSH."""

import threading

import pytest
from trainwarden.events import types as t
from trainwarden.remote.fleet import Fleet
from trainwarden.remote.launch import RemoteLauncher
from trainwarden.remote.plan import Plan
from trainwarden.remote.planner import PlanRunner

from tests.helpers import events_of, wait_for
from tests.remote.conftest import experiment

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.ssh, pytest.mark.slow]


def make(pool, store, gpu_server, fail_e1=False):
    env = {"FINISH_AT": "6", "STEP_S": "0.1"}
    exps = [
        experiment("e1", env={**env, **({"FAIL_AT": "3"} if fail_e1 else {})}),
        experiment("e2", env=env, depends_on=("e1",)),
        experiment("e3", env={**env, "BARRIER": "e3,e4"}, depends_on=("e2",)),
        experiment("e4", env={**env, "BARRIER": "e3,e4"}, depends_on=("e2",)),
    ]
    fleet = Fleet(servers={"gpu1": gpu_server.server}, experiments={e.name: e for e in exps})
    launcher = RemoteLauncher(shell=pool, store=store, fleet=fleet, host="ctl",
                              secrets={"WANDB_API_KEY": "good-key-0123456789"})  # fmt: skip
    runner = PlanRunner(store=store, launcher=launcher, shell=pool, fleet=fleet, host="ctl", poll_s=0.1)
    return runner, Plan(name="p1", experiments=("e1", "e2", "e3", "e4"))


def test_plan_runs_the_dag_with_the_independent_pair_in_parallel(pool, store, gpu_server):
    runner, plan = make(pool, store, gpu_server)
    final = runner.run(plan)
    assert final.finished
    assert {name: final.state_of(name) for name in plan.experiments} == dict.fromkeys(plan.experiments, "finished")
    launched = {n: events_of(store, n, t.RUN_LAUNCHED)[0] for n in plan.experiments}
    ended = {n: events_of(store, n, t.RUN_FINISHED)[0] for n in plan.experiments}
    assert ended["e1"].ts <= launched["e2"].ts and ended["e2"].ts <= launched["e3"].ts
    # e3 and e4 overlap: each finishes only after both started (BARRIER), so neither waited for the other
    assert launched["e4"].ts < ended["e3"].ts and launched["e3"].ts < ended["e4"].ts
    assert all(e.data["exit_code"] == 0 for e in ended.values())
    assert {tuple(launched["e3"].data["gpus"]), tuple(launched["e4"].data["gpus"])} == {(0,), (1,)}
    assert all(len(events_of(store, n, t.RUN_LAUNCHED)) == 1 for n in plan.experiments)


def test_a_failed_parent_blocks_its_children(pool, store, gpu_server):
    runner, plan = make(pool, store, gpu_server, fail_e1=True)
    final = runner.run(plan)
    assert final.state_of("e1") == "failed"
    assert [final.state_of(n) for n in ("e2", "e3", "e4")] == ["blocked"] * 3
    assert "e1 failed" in final.steps["e2"]["reason"]
    (failed,) = events_of(store, "e1", t.RUN_FAILED)
    assert failed.data["exit_code"] == 3
    assert any("step=3" in line for line in failed.data["log_tail"])
    assert events_of(store, "e2", t.RUN_LAUNCHED) == []


def test_a_restarted_runner_carries_on_without_relaunching(pool, store, gpu_server):
    runner, plan = make(pool, store, gpu_server)
    stop = threading.Event()
    first = threading.Thread(target=runner.run, args=(plan,), kwargs={"stop": stop})
    first.start()
    wait_for(lambda: events_of(store, "e1", t.RUN_LAUNCHED), what="e1 launched")
    stop.set()
    first.join(timeout=10)
    runner2, _ = make(pool, store, gpu_server)
    final = runner2.run(plan)
    assert final.finished
    assert all(len(events_of(store, n, t.RUN_LAUNCHED)) == 1 for n in plan.experiments)
    assert len(events_of(store, plan.stream, t.PLAN_STARTED)) == 1

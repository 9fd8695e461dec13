"""Every launch honours the plans: `launch EXP` outside a plan runner is refused while the newest plan
that lists EXP holds it back (a parent not finished), unless forced; a forced launch says who and why.
Real sshd, tmux, redis-server and the real plan runner."""

import threading
import time
from dataclasses import replace

import pytest
from trainwarden.bot.launcher import FleetLauncher
from trainwarden.events import types as t
from trainwarden.remote.errors import PlanHeld
from trainwarden.remote.fleet import Fleet
from trainwarden.remote.launch import RemoteLauncher
from trainwarden.remote.plan import Plan
from trainwarden.remote.planner import PlanRunner

from tests.helpers import events_of, wait_for
from tests.remote.conftest import experiment
from tests.slack_bot import ADMIN, command, running_bot

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.ssh, pytest.mark.slow]


def make(pool, store, gpu_server, first_env):
    fast = {"FINISH_AT": "4", "STEP_S": "0.05"}
    exps = [experiment("e1", env=first_env),
            experiment("e2", env=fast, depends_on=("e1",), resume_command=("python", "train.py"), max_restarts=1),
            experiment("e3", env=fast, depends_on=("e2",))]  # fmt: skip
    fleet = Fleet(servers={"gpu1": gpu_server.server}, experiments={e.name: e for e in exps})
    launcher = RemoteLauncher(shell=pool, store=store, fleet=fleet, host="ctl",
                              secrets={"WANDB_API_KEY": "good-key-0123456789"})  # fmt: skip
    runner = PlanRunner(store=store, launcher=launcher, shell=pool, fleet=fleet, host="ctl", poll_s=0.1)
    return launcher, runner, Plan(name="p1", experiments=("e1", "e2", "e3"))


def test_a_child_waiting_for_a_running_parent_is_refused_and_force_is_recorded(pool, store, gpu_server):
    launcher, runner, plan = make(pool, store, gpu_server, {"STEP_S": "0.05"})  # e1 trains on
    stop = threading.Event()
    watching = threading.Thread(target=runner.run, args=(plan,), kwargs={"stop": stop})
    watching.start()
    try:
        wait_for(lambda: runner.state(plan).state_of("e1") == "running", what="e1 running in the plan")
    finally:
        stop.set()
        watching.join(timeout=30)
    since = time.strftime("%H:%M", time.localtime(runner.state(plan).since["e1"]))
    with pytest.raises(PlanHeld) as refused:
        launcher.launch("e2")
    assert refused.value.args[0] == (f"e2 waits for e1 in plan p1 (e1 is running since {since}); wait, or "
                                  "`trainwarden launch e2 --force` to launch outside the plan")  # fmt: skip
    (said,) = events_of(store, "e2", t.LAUNCH_REFUSED)
    assert said.data["check"] == "plan" and said.data["reason"] == refused.value.args[0]
    assert events_of(store, "e2", t.RUN_LAUNCHED) == []
    before = time.time()
    launched = launcher.launch("e2", force=True, by="alice")
    forced = launched.data["forced"]
    assert (forced["by"], forced["plan"]) == ("alice", "p1") and before <= forced["at"] <= time.time()
    assert forced["overrode"] == f"e2 waits for e1 in plan p1 (e1 is running since {since})"
    assert launcher.first_seconds(launched, within_s=10).code == 0  # it ended (run.finished recorded)
    resumed = launcher.launch("e2", resume=True, attempt=2)  # a worker's resume of it is not held back again
    assert "forced" not in resumed.data and events_of(store, "e2", t.RUN_FINISHED)[0].data["exit_code"] == 0


def test_a_child_of_a_failed_parent_is_blocked_and_slack_is_told(
    pool, store, gpu_server, redis_server, slack_api
):  # fmt: skip
    launcher, runner, plan = make(pool, store, gpu_server, {"FAIL_AT": "2", "STEP_S": "0.05"})
    final = runner.run(plan)
    assert [final.state_of(n) for n in plan.experiments] == ["failed", "blocked", "blocked"]
    with pytest.raises(PlanHeld, match=r"^e3 is blocked in plan p1: e2 is blocked too \(e1 failed; it must finish "
                       r"first\); fix e2 and run the plan again, or `trainwarden launch e3 --force`"):  # fmt: skip
        launcher.launch("e3")
    with running_bot(redis_server.url, slack_api, fleet=launcher.fleet, launcher=FleetLauncher(launcher)) as bot:
        _, body = command(bot, slack_api, "launch", "e2")
        assert body == {"response_type": "ephemeral", "text": "Refused, nothing was run: e2 is blocked in plan p1: "
                        "e1 failed; fix e1 and run the plan again, or `/tw launch e2 --force` to launch outside the "
                        "plan."}  # fmt: skip
        assert events_of(store, "e2", t.RUN_LAUNCHED) == []
        (said,) = events_of(store, "e2", t.LAUNCH_REFUSED)
        assert said.data["check"] == "plan" and said.data["reason"].endswith(
            "`/tw launch e2 --force` to launch outside the plan"
        )
        _, body = command(bot, slack_api, "launch", "e2 --force")
        assert body["text"] == "Launching e2 on gpu1; the outcome goes to the run's thread."
        (launched,) = wait_for(lambda: events_of(store, "e2", t.RUN_LAUNCHED), what="e2 launched")
    assert launched.data["forced"]["by"] == ADMIN and launched.data["requested_by"] == ADMIN
    assert launched.data["forced"]["overrode"] == "e2 is blocked in plan p1: e1 failed"


def test_a_plan_run_again_governs_instead_of_the_old_one(pool, store, gpu_server):
    launcher, runner, plan = make(pool, store, gpu_server, {"FAIL_AT": "2", "STEP_S": "0.05"})
    runner.run(plan)
    e1 = launcher.fleet.experiments["e1"]
    launcher.fleet.experiments["e1"] = replace(e1, env={"FINISH_AT": "4", "STEP_S": "0.05"})  # fixed; run again
    again = runner.run(Plan(name="p2", experiments=plan.experiments))
    assert [again.state_of(n) for n in plan.experiments] == ["finished"] * 3
    assert launcher.plan_hold("e3") is None

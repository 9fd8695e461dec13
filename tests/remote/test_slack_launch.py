"""/launch from Slack: signed slash command -> ack -> launch over a real sshd -> outcome in the run's thread."""

import pytest
from trainwarden.bot.launcher import FleetLauncher
from trainwarden.events import types as t
from trainwarden.remote.stop import StopTarget

from tests.helpers import events_of, wait_for
from tests.remote.conftest import experiment, launcher
from tests.slack_bot import ADMIN, command, running_bot

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.ssh]


def posted(slack_api, prefix):
    return wait_for(lambda: [m for m in slack_api.messages if m.text.startswith(prefix)], what=prefix)[0]


def test_launch_acks_then_starts_the_run_and_reports_in_its_thread(pool, store, gpu_server, redis_server, slack_api):
    remote = launcher(pool, store, gpu_server, experiment(gpu_ids=(1,), owner="U0OWNER"))
    with running_bot(redis_server.url, slack_api, fleet=remote.fleet, launcher=FleetLauncher(remote)) as bot:
        _, body = command(bot, slack_api, "launch", "exp01 gpu1")
        assert body == {"response_type": "ephemeral",
                        "text": "Launching exp01 on gpu1; the outcome goes to the run's thread."}  # fmt: skip
        (launched,) = wait_for(lambda: events_of(store, "exp01", t.RUN_LAUNCHED), what="run.launched")
        assert (launched.data["requested_by"], launched.data["owner"]) == (ADMIN, "U0OWNER")  # named on its STOP
        message = posted(slack_api, "LAUNCHED")
        assert message.text.startswith(f"LAUNCHED exp01@gpu1 by <@{ADMIN}>: GPUs 1, tmux session train-exp01, log ")
        # the same experiment again: its session exists; the failure is said in the same thread
        command(bot, slack_api, "launch", "exp01")
        failed = posted(slack_api, "LAUNCH FAILED")
        assert failed.thread_ts == message.ts
        assert "exp01@gpu1 (asked by <@UADMIN>)" in failed.text
    target = StopTarget.from_launch("exp01", launched.data, default_host="ctl")
    assert pool.run(gpu_server.server, f"tmux -L {target.tmux_socket} has-session -t {target.session}").exit_status == 0


def test_a_refused_preflight_is_reported_not_launched(pool, store, gpu_server, redis_server, slack_api):
    gpu_server.set_gpu_count(0)
    remote = launcher(pool, store, gpu_server, experiment())
    with running_bot(redis_server.url, slack_api, fleet=remote.fleet, launcher=FleetLauncher(remote)) as bot:
        command(bot, slack_api, "launch", "exp01")
        failed = posted(slack_api, "LAUNCH FAILED")
        assert "preflight failed: torch_gpus" in failed.text
    assert events_of(store, "exp01", t.RUN_LAUNCHED) == []


def test_a_command_that_fails_in_its_first_seconds_is_said_failed_in_the_thread(
    pool, store, gpu_server, redis_server, slack_api
):
    # no agent runs here: before, nothing recorded the exit and the thread said only LAUNCHED
    remote = launcher(pool, store, gpu_server, experiment("retF", env={"FAIL_AT": "3", "STEP_S": "0.3"}))
    with running_bot(redis_server.url, slack_api, fleet=remote.fleet, launcher=FleetLauncher(remote)) as bot:
        command(bot, slack_api, "launch", "retF")
        launched = posted(slack_api, "LAUNCHED")
        (failed,) = wait_for(lambda: events_of(store, "retF", t.RUN_FAILED), timeout=30, what="run.failed")
        assert failed.data["exit_code"] == 3 and failed.data["log_tail"][-1] == "step=3 loss=1.3333"
        said = posted(slack_api, "FAILED")
        assert said.thread_ts == launched.ts and "exit" in said.text

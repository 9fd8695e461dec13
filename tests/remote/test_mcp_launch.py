"""`launch` through `trainwarden mcp` (the real mcp client over stdio) onto a real sshd + tmux + redis: it goes through
the W&B guard and the preflight as Slack's /launch does, and the run records the agent's identity."""

import pytest
import yaml
from trainwarden.events import types as t

from tests import mcp_client
from tests.helpers import events_of
from tests.remote import test_cli_remote
from tests.remote.test_cli_launch import add_experiment
from tests.remote.test_cli_remote import KEY

remote_settings = test_cli_remote.remote_settings  # the fixture: settings, servers.yaml and experiments/

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.ssh, pytest.mark.slow]


def allow_launch(settings_file):
    body = yaml.safe_load(settings_file.read_text())
    body["mcp"] = {"allow_actions": ["launch"], "identity": "research-agent"}
    settings_file.write_text(yaml.safe_dump(body))


def test_an_agent_launches_through_the_wandb_guard_and_the_preflight(remote_settings, store, tmp_path):
    allow_launch(remote_settings)
    add_experiment(tmp_path, "offline", env={"WANDB_MODE": "offline"})
    with mcp_client.stdio(remote_settings, tmp_path / "mcp.log", env=KEY) as client:
        refused = client.call("launch", experiment="offline", check_s=0)
        launched = client.text("launch", experiment="a", check_s=0)
        unknown = client.call("launch", experiment="nope")
    assert refused.is_error
    assert "offline: W&B offline/disabled: W&B would not record this run (env sets WANDB_MODE=offline)" in (
        mcp_client.text_of(refused)
    )
    assert events_of(store, "offline", t.RUN_LAUNCHED) == []
    (guard,) = events_of(store, "offline", t.LAUNCH_REFUSED)
    assert guard.data["check"] == "wandb_guard"
    (failed,) = events_of(store, "offline", t.LAUNCH_FAILED)
    assert failed.data["by"] == "mcp" and failed.data["user"] == "mcp:research-agent"

    assert launched.startswith("launched a on gpu1 GPUs [0] in tmux session train-a; log: gpu1:/"), launched
    (run,) = events_of(store, "a", t.RUN_LAUNCHED)
    assert run.data["requested_by"] == "mcp:research-agent"
    checks = {e.data["check"]: e.data["ok"] for e in events_of(store, "a", t.PREFLIGHT)}
    assert checks["wandb_guard"] is True and len(checks) > 3 and all(checks.values()), checks
    received = [e.data["text"] for e in events_of(store, t.SYSTEM_RUN, t.COMMAND_RECEIVED)]
    assert received == ["launch offline", "launch a", "launch nope"]  # none of them was a run before

    assert unknown.is_error and "unknown experiment 'nope'; known: a, b, long, offline" in mcp_client.text_of(unknown)


def test_a_launch_whose_command_fails_at_once_is_reported_with_its_last_lines(remote_settings, store, tmp_path):
    allow_launch(remote_settings)
    add_experiment(tmp_path, "retF", env={"FAIL_AT": "3", "STEP_S": "0.5"})  # step 1, 2, 3 -> exit 3 after ~1 s
    with mcp_client.stdio(remote_settings, tmp_path / "mcp.log", env=KEY) as client:
        failed = client.call("launch", experiment="retF")  # the first seconds watched, as `trainwarden launch` does
    assert failed.is_error
    head, *lines = mcp_client.text_of(failed).splitlines()
    assert "retF exited with code 3 within 1 s of launch; log: gpu1:/" in head and head.endswith("; last lines:")
    assert lines[-1] == "  step=3 loss=1.3333"
    (ended,) = events_of(store, "retF", t.RUN_FAILED)
    assert ended.data["exit_code"] == 3
    assert events_of(store, "retF", t.RUN_LAUNCHED)[0].data["requested_by"] == "mcp:research-agent"

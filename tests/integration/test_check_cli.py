"""What a person reads right after `trainwarden launch`: the launch records whether the run uses W&B,
and `trainwarden check RUN` on a run with no decision yet says so in words (never `None`)."""

import subprocess

import pytest
from trainwarden.events import types as t

from tests.conftest import REPO, cli_argv
from tests.helpers import events_of

pytestmark = [pytest.mark.redis, pytest.mark.tmux]


def cli(settings, *args):
    return subprocess.run(cli_argv(settings, *args), capture_output=True, text=True, cwd=REPO, check=False,
                          timeout=60)  # fmt: skip


def test_launch_no_wandb_then_check_before_any_decision(store, settings_file, tmp_path, tmux_socket):
    launched = cli(settings_file, "launch", "--no-wandb", "--workdir", str(tmp_path), "--tmux-socket", tmux_socket,
                   "exp09", "--", "bash", "-c", "echo hello from exp09; sleep 30")  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    (event,) = events_of(store, "exp09", t.RUN_LAUNCHED)
    assert event.data["uses_wandb"] is False
    ((_, fields),) = store.redis.xrange(store.keys.agent_control(event.data["host"]))
    assert fields[b"wandb"] == b"0"  # the agent neither reads nor expects W&B for it

    out = cli(settings_file, "check", "exp09")
    assert out.returncode == 0, out.stderr
    report = out.stdout
    for field in ("Data source**: not announced by the agent yet", "Decision**: none yet", "Rule**: none fired",
                  "Reason**: no decision recorded yet", "Remedy**: nothing to do",
                  "Run**: exp09 on testhost"):  # fmt: skip
        assert f"- **{field}" in report, report
    assert "None" not in report and " at 0x" not in report, report
    # no notable line was recorded: the log's own last lines, read from here (the launch waited for them)
    assert "hello from exp09" in report.split("### Last log lines")[1], report

    unknown = cli(settings_file, "check", "exp404")
    assert unknown.returncode == 1 and "unknown run 'exp404'" in unknown.stderr

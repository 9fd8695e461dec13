"""Evidence that cannot be written never holds up a STOP: the run is stopped, the failure recorded and said.

The evidence directory and the findings file lie under a regular file, which no user (root
included) can create anything in: the real agent, dispatcher and worker run against a real tmux
run whose loss turns NaN.
"""

import os
import subprocess
import sys

import pytest
import yaml
from trainwarden.events import catalogue
from trainwarden.events import types as t
from trainwarden.remote.local_launch import LaunchSpec, launch_local
from trainwarden.remote.stop import LocalTmuxController, StopTarget

from tests.conftest import REPO, cli_argv, watch_until_stopped
from tests.helpers import events_of

pytestmark = [pytest.mark.redis, pytest.mark.tmux]


@pytest.fixture
def unwritable_settings(settings_file, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a regular file: nothing can be created under it\n")
    body = yaml.safe_load(settings_file.read_text())
    body["evidence_dir"] = str(blocker / "evidence")
    body["findings_file"] = str(blocker / "findings.md")
    settings_file.write_text(yaml.safe_dump(body))
    return settings_file, blocker


def stop_a_nan_run(settings, store, tmp_path, tmux_socket):
    """A real tmux run whose loss turns NaN, watched by the real agent, dispatcher and worker until
    its STOP is carried out; returns its `run.launched` event."""
    log = tmp_path / "train.log"
    spec = LaunchSpec(
        run="exp01",
        command=(sys.executable, "-m", "trainwarden.tools.demo_train", "--nan-at", "5", "--interval", "0.1"),
        workdir=REPO, log_path=log, tmux_socket=tmux_socket,
    )  # fmt: skip
    launched = launch_local(spec, store=store, host="testhost")
    watch_until_stopped(settings, store, tmp_path, "exp01", log)
    assert not LocalTmuxController().is_running(StopTarget.from_launch("exp01", launched.data, default_host="x"))
    return launched


def test_a_nan_is_stopped_although_its_evidence_cannot_be_written(store, tmp_path, tmux_socket, unwritable_settings):
    settings, blocker = unwritable_settings
    stop_a_nan_run(settings, store, tmp_path, tmux_socket)
    types = [e.type for e in events_of(store, "exp01")]
    assert t.EVIDENCE_BUILT not in types
    assert types.index(t.EVIDENCE_FAILED) < types.index(t.STOP_DONE)  # tried first, and the stop went on
    (failed,) = events_of(store, "exp01", t.EVIDENCE_FAILED)
    assert failed.data["path"].startswith(str(blocker / "evidence" / "exp01"))
    assert "Not a directory" in failed.data["error"]
    assert [p.split(":")[0] for p in failed.data["problems"]] == [failed.data["path"], str(blocker / "findings.md")]
    assert failed.data["pack"] is None and failed.data["findings"] is None
    assert catalogue.problems(failed.type, failed.data) == []
    worker_log = (tmp_path / "worker.log").read_text()
    assert "could not be written" in worker_log and "Traceback" not in worker_log

    # the STOP message (the bot's console sink: the same words it posts to Slack) says what is missing
    bot = subprocess.run(cli_argv(settings, "bot", "--burst"), capture_output=True, text=True, timeout=60, cwd=REPO,
                         env={**os.environ, "SLACK_BOT_TOKEN": ""}, check=False)  # fmt: skip
    assert bot.returncode == 0, bot.stderr
    (stopped,) = [line for line in bot.stdout.splitlines() if "STOPPED exp01@" in line]
    assert f"Evidence could not be written: {failed.data['path']}: " in stopped
    assert "Not a directory" in stopped and "(+1 more)" in stopped


def test_config_check_names_each_path_that_cannot_be_written(unwritable_settings):
    settings, blocker = unwritable_settings
    done = subprocess.run(cli_argv(settings, "config", "check"), capture_output=True, text=True, timeout=60, cwd=REPO,
                          check=False)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    cannot = f"FAIL cannot be created: {blocker} is not a directory"
    assert f"evidence_dir (worker): {blocker / 'evidence'}: {cannot}" in lines
    assert f"findings_file (worker): {blocker / 'findings.md'}: {cannot}" in lines
    assert any(line.startswith("agent.state_file (agent): ") and line.endswith(": writable") for line in lines)


def test_the_agent_refuses_to_start_with_a_state_file_it_cannot_write(unwritable_settings):
    settings, blocker = unwritable_settings
    done = subprocess.run(cli_argv(settings, "agent", "--burst", "--state-file", str(blocker / "state.json")),
                          capture_output=True, text=True, timeout=60, cwd=REPO, check=False)  # fmt: skip
    assert done.returncode == 1
    (error, *_) = [line for line in done.stderr.splitlines() if line.startswith("trainwarden: error:")]
    assert f"agent.state_file {blocker / 'state.json'} cannot be created: {blocker} is not a directory" in error


def test_a_hung_evidence_write_is_given_up_and_the_stop_goes_on(store, settings_file, tmp_path, tmux_socket):
    """A findings file that blocks every open (a pipe nobody reads, as a hung network mount would):
    the pack is given up after `workers.evidence_timeout_s` and the run is stopped all the same."""
    fifo = tmp_path / "findings.md"
    os.mkfifo(fifo)
    body = yaml.safe_load(settings_file.read_text())
    body["findings_file"] = str(fifo)
    body.setdefault("workers", {})["evidence_timeout_s"] = 1
    settings_file.write_text(yaml.safe_dump(body))
    stop_a_nan_run(settings_file, store, tmp_path, tmux_socket)
    (failed,) = events_of(store, "exp01", t.EVIDENCE_FAILED)
    assert "not written within 1 s" in failed.data["error"]
    assert catalogue.problems(failed.type, failed.data) == []
    worker_log = (tmp_path / "worker.log").read_text()
    assert "findings_file" in worker_log and "not a regular file" in worker_log  # said at start, and it went on

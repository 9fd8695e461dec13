"""A run stopped on request ends as "stopped": never a failure, never posted as FAILED, never resumed.

`trainwarden launch` starts a real tmux run; `trainwarden stop` asks for its stop; the real agent,
dispatcher and worker carry it out (Ctrl-C to the session). The wrapper records the interrupted
command's exit status (130), and the bot's console sink, which prints the words it would post to
Slack, says STOPPED and nothing else.
"""

import os
import subprocess
import sys

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.events.run_view import run_state

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.tmux]


def test_a_stopped_run_is_stopped_not_failed(store, tmp_path, tmux_socket, settings_file):
    log = tmp_path / "exp01.log"
    body = yaml.safe_load(settings_file.read_text())
    body["agent"]["process_interval_s"] = 0.2  # the agent looks for the run's end this often
    settings_file.write_text(yaml.safe_dump(body))
    procs = [spawn(settings_file, tmp_path / f"{name}.log", name) for name in ("agent", "dispatcher", "worker")]
    try:
        trainer = [sys.executable, "-m", "trainwarden.tools.demo_train", "--nan-at", "100000", "--interval", "0.05"]
        launch = ["launch", "--workdir", str(tmp_path), "--tmux-socket", tmux_socket, "--check-s", "0", "exp01",
                  "--", *trainer]  # fmt: skip
        subprocess.run(cli_argv(settings_file, *launch), check=True, cwd=REPO, capture_output=True, timeout=60)
        wait_for(lambda: log.exists() and "step=3 " in log.read_text(), timeout=30, what="the run to train")
        subprocess.run(cli_argv(settings_file, "stop", "exp01", "--reason", "enough"), check=True, cwd=REPO,
                       capture_output=True, timeout=60)  # fmt: skip
        wait_for(lambda: events_of(store, "exp01", t.STOP_DONE), timeout=30, what="stop.done")
        (ended,) = wait_for(lambda: events_of(store, "exp01", t.RUN_FAILED) + events_of(store, "exp01", t.RUN_FINISHED),
                            timeout=30, what="the agent to see the run end")  # fmt: skip
    finally:
        for p in procs:
            stop_process(p)
        for name in ("agent", "dispatcher", "worker"):
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])
        print("--- events:", [(e.type, e.data) for e in events_of(store, "exp01") if e.type != t.METRIC])

    assert ended.data["exit_code"] == 130  # Ctrl-C: the wrapper wrote the interrupted command's status
    assert "KeyboardInterrupt" in log.read_text()  # the trainer's last words reached the log
    assert run_state(store, "exp01").status == "stopped"
    types = [e.type for e in events_of(store, "exp01")]
    assert types.count(t.RUN_LAUNCHED) == 1 and t.RESUME_SKIPPED not in types
    opened = [e.data["rule"] for e in events_of(store, "exp01", t.ANOMALY_OPENED)]
    assert "run-failed" not in opened  # the end of a stopped run is not judged

    bot = subprocess.run(cli_argv(settings_file, "bot", "--burst"), capture_output=True, text=True, timeout=60,
                         cwd=REPO, env={**os.environ, "SLACK_BOT_TOKEN": ""}, check=False)  # fmt: skip
    assert bot.returncode == 0, bot.stderr
    posted = bot.stdout
    assert "STOPPED exp01@testhost: sent Ctrl-C to train-exp01" in posted
    assert "FAILED" not in posted and "None" not in posted, posted

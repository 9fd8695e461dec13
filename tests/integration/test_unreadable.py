"""A run read blind, with real processes: a python loop prints a format no reader knows; the agent says so within
its budget, the worker opens `metrics-unreadable` once, the bot posts it (to the local Slack API, or to its
console), `check` and `health` say it with the fixes; when the loop starts printing `step=N loss=X` it resolves.
A run printing readable metrics from its first line gets no such warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from trainwarden.events import reading
from trainwarden.events import types as t
from trainwarden.events.keys import Keys

from tests.conftest import cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for
from tests.slack_api import SlackAPI
from trainwarden.cli.entry import main
from trainwarden.tools.redis_server import free_port

pytestmark = [pytest.mark.redis, pytest.mark.slow]

# A newcomer's own loop: a made-up format until the file `go` appears, then one the agent reads.
TRAIN = """
import os, sys, time
go, readable = sys.argv[1], sys.argv[2] == "readable"
for step in range(1, 100000):
    loss = 4.2 * 0.99**step
    if readable or os.path.exists(go):
        print(f"step={step} loss={loss:.4f}", flush=True)
    else:
        print(f">> it#{step} -- L={loss:.3f} ::", flush=True)
    time.sleep(0.1)
"""
MADE_UP = ">> it#"


def cli(capsys: pytest.CaptureFixture[str], settings: Path, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(cli_argv(settings, *args)[3:])
    out, err = capsys.readouterr()
    return code, out + err


@pytest.mark.parametrize("sink", ["slack", "console"])
def test_a_blind_run_is_said_within_its_budget_once_everywhere_and_resolves_when_metrics_come(
    sink: str, store, settings_file: Path, tmp_path: Path, slack_api: SlackAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = yaml.safe_load(settings_file.read_text())
    settings["agent"].update({"nvml": False, "unreadable_after_s": 3, "unreadable_after_lines": 20})
    settings["heartbeat_interval_s"] = 1
    settings["slack"] = {"channel": "C1", "rate_per_s": 1000, "burst": 1000, "http_host": "127.0.0.1",
                         "http_port": free_port()}  # fmt: skip
    settings_file.write_text(yaml.safe_dump(settings))
    go = tmp_path / "go"
    runs = {}
    for name, kind in (("blind", "made-up"), ("plain", "readable")):
        log = tmp_path / f"{name}.log"
        with open(log, "ab") as sink_file:
            runs[name] = (subprocess.Popen([sys.executable, "-c", TRAIN, str(go), kind], stdout=sink_file,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL), log)  # fmt: skip
    bot_env = ({"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_API_URL": slack_api.url, "SLACK_SIGNING_SECRET": "s3cret"}
               if sink == "slack" else {"SLACK_BOT_TOKEN": "", "SLACK_APP_TOKEN": ""})  # fmt: skip
    names = ("agent", "dispatcher", "worker", "bot")
    watch = [f"--watch={run}={log}" for run, (_, log) in runs.items()]
    procs = [
        spawn(settings_file, tmp_path / "agent.log", "agent", *watch),
        spawn(settings_file, tmp_path / "dispatcher.log", "dispatcher"),
        spawn(settings_file, tmp_path / "worker.log", "worker"),
        spawn(settings_file, tmp_path / "bot.log", "bot", env=bot_env),
    ]

    def posted(text: str) -> list[str]:
        if sink == "slack":
            return [m.text for m in slack_api.messages if text in m.text]
        return [line for line in (tmp_path / "bot.log").read_text(errors="replace").splitlines() if text in line]

    try:
        (said,) = wait_for(lambda: posted("UNREADABLE blind@testhost"), timeout=60, what="the unreadable warning")
        assert MADE_UP in said and "trainwarden.log(...)" in said and "metrics.csv" in said and "W&B" in said
        (status,) = [e for e in events_of(store, "blind", t.SOURCE_STATUS) if e.data["source"] == reading.SOURCE]
        assert status.data["status"] == reading.UNREADABLE and status.data["sample"].startswith(MADE_UP)
        assert 20 <= status.data["lines"] < 100  # said within its budget (20 lines or 3 s), not minutes later

        code, out = cli(capsys, settings_file, "check", "blind")
        assert code == 0, out
        assert "UNREADABLE" in out and MADE_UP in out and "trainwarden.log(...)" in out
        assert "no metrics yet" not in out

        def health(has: str = "") -> str | None:
            out = cli(capsys, settings_file, "health")[1]
            return out if has in out else None

        shown = wait_for(lambda: health("metrics unreadable: blind:"), timeout=30, what="the agent's notice in health")
        assert MADE_UP in shown and "trainwarden.log(...)" in shown and "plain" not in shown.split("unreadable:")[1]

        go.write_text("")  # the newcomer switches to a format the agent reads
        wait_for(lambda: posted("RESOLVED blind@testhost"), timeout=60, what="the warning resolved")
        wait_for(lambda: "metrics unreadable" not in str(health()), timeout=30, what="health without the notice")
        wait_for(lambda: [e for e in events_of(store, "plain", t.METRIC) if "loss" in e.data], timeout=10,
                 what="the readable run's metrics")  # fmt: skip
    finally:
        for proc, _ in runs.values():
            proc.kill()
            proc.wait()
        for p in procs:
            stop_process(p)
        for name in names:  # shown by pytest only when the test fails
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])

    assert len(posted("UNREADABLE blind@testhost")) == 1  # once, not at every line
    assert not posted("UNREADABLE plain@testhost")
    assert not [e for e in events_of(store, "plain", t.SOURCE_STATUS) if e.data["source"] == reading.SOURCE]
    statuses = [e.data["status"] for e in events_of(store, "blind", t.SOURCE_STATUS)
                if e.data["source"] == reading.SOURCE]  # fmt: skip
    assert statuses == [reading.UNREADABLE, reading.READABLE]
    assert store.redis.exists(Keys().beat("agent@testhost"))

"""`--log-format json`: the real dispatcher and worker (processes, real Redis) write one JSON object per
stderr line, with the daemon, the run and the event id they were handling, and secrets masked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from trainwarden.core.redact import MASK
from trainwarden.events.store import EventStore

from tests.conftest import REPO
from tests.helpers import metric
from trainwarden import logsetup
from trainwarden.cli.entry import build_parser

TOKEN = "xoxb-1111111111-2222222222-abcdefghijklmnopqrstuvwx"  # shaped like a Slack bot token
KEYS = {"time", "level", "daemon", "run", "event_id", "logger", "message"}


def trainwarden(settings: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """One `python -m trainwarden` (no `--log-level`: some tests set it through the environment)."""
    quiet = {k: v for k, v in os.environ.items() if not k.startswith("TRAINWARDEN_LOG_")}
    argv = [sys.executable, "-m", "trainwarden", "--config", str(settings), *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, env={**quiet, **(env or {})},
                          check=False)  # fmt: skip


def records(stderr: str) -> list[dict[str, Any]]:
    """Every stderr line parsed as JSON (a line that is not one fails the test)."""
    lines = stderr.splitlines()
    assert lines, "no log line at all"
    parsed = [json.loads(line) for line in lines]
    for record in parsed:
        assert set(record) >= KEYS, record
        assert record["time"].endswith("Z") and "T" in record["time"]
    return parsed


@pytest.fixture
def secret_queue(settings_file: Path) -> Path:
    """The queue's name holds the token, and the dispatcher names its queue at INFO: the line must mask it."""
    body = yaml.safe_load(settings_file.read_text())
    body["queue"] = f"q-{TOKEN}"
    settings_file.write_text(yaml.safe_dump(body))
    return settings_file


def test_dispatcher_lines_are_json_with_the_event_id_and_no_secret(secret_queue: Path, r: redis.Redis,
                                                                    store: EventStore) -> None:  # fmt: skip
    bad = r.xadd(store.keys.feed(), {"r": "exp-json", "junk": "1"}).decode()  # no first/last/types: dead-lettered
    done = trainwarden(secret_queue, "--log-level", "info", "--log-format", "json", "dispatcher", "--burst",
                       env={"SLACK_BOT_TOKEN": TOKEN})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert TOKEN not in done.stderr and MASK in done.stderr
    lines = records(done.stderr)
    assert {line["daemon"] for line in lines} == {"dispatcher"}
    assert any(line["level"] == "INFO" and "reading the feed into queue" in line["message"] for line in lines)
    dead = [line for line in lines if "dead-lettered feed entry" in line["message"]]
    assert len(dead) == 1
    assert (dead[0]["level"], dead[0]["run"], dead[0]["event_id"]) == ("WARNING", "exp-json", bad)


def test_the_worker_names_the_run_and_entry_of_its_job(settings_file: Path, r: redis.Redis, store: EventStore) -> None:
    poison = r.xadd(store.keys.log("exp-json"), {"e": "not an event"}).decode()
    store.append([metric("exp-json", 1, loss=1.0)])  # its feed entry gives the run a job
    env = {"TRAINWARDEN_LOG_FORMAT": "JSON", "TRAINWARDEN_LOG_LEVEL": "Warning"}  # the variables, in any case
    dispatched = trainwarden(settings_file, "dispatcher", "--burst", env=env)
    assert dispatched.returncode == 0, dispatched.stderr
    worked = trainwarden(settings_file, "worker", "--burst", env=env)
    assert worked.returncode == 0, worked.stderr
    lines = records(worked.stderr)
    assert all(line["daemon"] == "worker" and line["level"] in ("WARNING", "ERROR") for line in lines), lines
    dead = [line for line in lines if "dead-lettered entry" in line["message"]]
    assert len(dead) == 1
    assert (dead[0]["run"], dead[0]["event_id"]) == ("exp-json", poison)


def test_the_text_format_stays_the_default(settings_file: Path, r: redis.Redis) -> None:
    done = trainwarden(settings_file, "--log-level", "INFO", "dispatcher", "--burst")
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stderr.splitlines() if "reading the feed" in line)
    assert " INFO " in line and not line.startswith("{")


def test_a_bad_level_or_format_names_the_choices(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    assert build_parser().parse_args(["--log-level", "debug", "runs"]).log_level == "DEBUG"
    monkeypatch.setenv(logsetup.LEVEL_ENV, "verbose")
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["runs"])
    assert exit_.value.code == 2
    assert "'verbose' is not a log level: use one of DEBUG, INFO, WARNING, ERROR" in capsys.readouterr().err
    monkeypatch.delenv(logsetup.LEVEL_ENV)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--log-format", "yaml", "runs"])
    assert "'yaml' is not a log format: use text or json" in capsys.readouterr().err

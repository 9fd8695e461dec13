"""A start-up phase is not "unreadable" (issue #37, item 2), with real processes: a python script prints start-up
lines only (`compiling model...`, `Downloading data: 45%`) for longer than `agent.unreadable_after_s`; the agent
says nothing until `agent.first_step_budget_s`, then the bot says it with start-up advice naming that setting. A
script printing a made-up table of recurring numbers beside it is said unreadable at `unreadable_after_s`, naming
that setting. Both scripts run as labs run them: PYTHONUNBUFFERED unset, printing with flush=True."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from trainwarden.events import reading
from trainwarden.events import types as t

from tests.conftest import spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

STARTUP = """
import itertools, time
print("compiling model...", flush=True)
for i in itertools.count():
    print(f"Downloading data: {i % 100}%", flush=True)
    if i % 10 == 0:
        print("building the index of shard", i // 10, flush=True)
    time.sleep(0.1)
"""
TABLE = """
import time
print("compiling model...", flush=True)
for step in range(1, 100000):
    print(f"#### {step} | {4.2 * 0.99**step:.4f} | 88 ####", flush=True)
    time.sleep(0.1)
"""
UNREADABLE_AFTER_S = 2.0


def reading_statuses(store, run: str) -> list:
    return [e for e in events_of(store, run, t.SOURCE_STATUS) if e.data["source"] == reading.SOURCE]


@contextmanager
def watched(settings_file: Path, tmp_path: Path, run: str, script: str) -> Iterator[Callable[[str], list[str]]]:
    """`script` run as a lab runs it, watched by the real agent, dispatcher, worker and bot (its console sink);
    yields what the bot posted that holds a text."""
    settings = yaml.safe_load(settings_file.read_text())
    settings["agent"].update({"nvml": False, "unreadable_after_s": "2s", "unreadable_after_lines": 1000,
                              "first_step_budget_s": "10s"})  # fmt: skip
    settings["heartbeat_interval_s"] = "1s"
    settings_file.write_text(yaml.safe_dump(settings))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as a lab runs it
    log = tmp_path / f"{run}.log"
    with open(log, "ab") as sink:
        child = subprocess.Popen([sys.executable, "-c", script], stdout=sink, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=env)  # fmt: skip
    bot_env = {"SLACK_BOT_TOKEN": "", "SLACK_APP_TOKEN": ""}  # the console sink: bot.log holds what it posts
    names = ("agent", "dispatcher", "worker", "bot")
    procs = [
        spawn(settings_file, tmp_path / "agent.log", "agent", f"--watch={run}={log}"),
        spawn(settings_file, tmp_path / "dispatcher.log", "dispatcher"),
        spawn(settings_file, tmp_path / "worker.log", "worker"),
        spawn(settings_file, tmp_path / "bot.log", "bot", env=bot_env),
    ]

    def posted(text: str) -> list[str]:
        return [line for line in (tmp_path / "bot.log").read_text(errors="replace").splitlines() if text in line]

    try:
        yield posted
    finally:
        child.kill()
        child.wait()
        for p in procs:
            stop_process(p)
        for name in names:  # shown by pytest only when the test fails
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])


def test_start_up_lines_say_nothing_until_the_first_step_budget_then_give_start_up_advice(
    store, settings_file: Path, tmp_path: Path
) -> None:
    with watched(settings_file, tmp_path, "startup", STARTUP) as posted:
        (said,) = wait_for(lambda: posted("startup@testhost"), timeout=90, what="the notice past the budget")
    assert said.split("] ", 1)[1].startswith("NO TRAINING OUTPUT YET startup@testhost: no training output")
    assert "agent.first_step_budget_s" in said and "compiling" in said
    assert "trainwarden.log" not in said and "cannot read" not in said
    # the run was read for longer than unreadable_after_s (its `Downloading data: N%` lines come as metric events,
    # no training metric among them) and said nothing until its one start-up notice
    (status,) = reading_statuses(store, "startup")
    assert status.data["status"] == reading.UNREADABLE and reading.is_startup(status.data["reason"])
    read = [e.ts for e in events_of(store, "startup", t.METRIC) if e.ts < status.ts]
    assert read and max(read) - min(read) > UNREADABLE_AFTER_S


def test_recurring_numbers_no_reader_understands_warn_at_unreadable_after_s_naming_it(
    store, settings_file: Path, tmp_path: Path
) -> None:
    with watched(settings_file, tmp_path, "table", TABLE) as posted:
        (said,) = wait_for(lambda: posted("table@testhost"), timeout=60, what="the table's warning")
    assert said.split("] ", 1)[1].startswith("UNREADABLE table@testhost: trainwarden cannot read this run's metrics")
    assert "####" in said and "agent.unreadable_after_s" in said and "trainwarden.log(...)" in said
    (status,) = reading_statuses(store, "table")
    assert status.data["status"] == reading.UNREADABLE and status.data["sample"].startswith("####")
    assert 3 <= status.data["lines"] < 1000  # said by its time budget, not its line budget

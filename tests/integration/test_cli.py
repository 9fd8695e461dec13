"""The command line against a real Redis: messages a user can act on, exit codes."""

import re
import subprocess
import time

import pytest
import redis
import yaml
from rq import Queue
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.heartbeat import read_beats
from trainwarden.events.keys import Keys
from trainwarden.workers.config import QUEUE_NAME
from trainwarden.workers.dispatcher import Dispatcher

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, metric, wait_for

pytestmark = pytest.mark.redis


def run_cli(settings, *args):
    return subprocess.run(cli_argv(settings, *args), capture_output=True, text=True, cwd=REPO, check=False,
                          timeout=60)  # fmt: skip


def test_stop_appends_a_request_that_replay_shows(store, settings_file):
    # launched in tmux: a run that nothing says how to stop is refused (tests/integration/test_watch_stop.py)
    launched = make_event(t.RUN_LAUNCHED, run="exp01", host="testhost", producer="launch/testhost", seq=1,
                          data={"host": "testhost", "session": "train-exp01"})  # fmt: skip
    store.append([launched, metric("exp01", 1, loss=1.0)])
    proc = run_cli(settings_file, "stop", "exp01", "--reason", "bad lr, token=abc123")
    assert proc.returncode == 0, proc.stderr
    (request,) = events_of(store, "exp01", t.STOP_REQUESTED)
    assert request.data["by"] == "cli"
    assert request.data["reason"] == "bad lr, token=***"


def test_stop_of_an_unknown_run_is_refused(store, settings_file):
    proc = run_cli(settings_file, "stop", "nope")
    assert proc.returncode == 1
    assert "unknown run 'nope'" in proc.stderr


def test_runs_and_dead_letters(store, settings_file):
    store.append([metric("exp01", 1, loss=1.0)])
    assert "exp01" in run_cli(settings_file, "runs").stdout
    assert "no dead letters" in run_cli(settings_file, "dead-letters").stdout
    store.dead_letter(source="tw:{exp01}:log", sid="1-0", reason="not valid JSON", fields={b"e": b"{"})
    out = run_cli(settings_file, "dead-letters").stdout
    assert "not valid JSON" in out and "1-0" in out


def test_replay_of_unknown_run(store, settings_file):
    proc = run_cli(settings_file, "replay", "ghost")
    assert proc.returncode == 1
    assert "has no events" in proc.stderr


def test_invalid_settings_file_names_the_line(tmp_path):
    bad = tmp_path / "tw.yaml"
    bad.write_text("redis_url: redis://127.0.0.1:1/0\nworkers:\n  lock_timeout: 3\n")
    proc = run_cli(bad, "runs")
    assert proc.returncode == 1
    assert f"{bad}:3:3: unknown key 'lock_timeout' in workers" in proc.stderr


def test_agent_learns_its_runs_from_the_control_stream(settings_file, store, tmp_path):
    log = tmp_path / "exp01.log"
    log.write_text("step=1 loss=2.0\n")
    control = store.keys.agent_control("testhost")
    store.redis.xadd(control, {"op": "watch", "run": "bad run", "log": str(log)})
    store.redis.xadd(control, {"op": "watch", "run": "exp01", "log": str(log), "session": "", "pid": ""})
    proc = run_cli(settings_file, "agent", "--burst")
    assert proc.returncode == 0, proc.stderr
    assert "skipping control message" in proc.stderr and "invalid run name 'bad run'" in proc.stderr
    assert [e.data for e in events_of(store, "exp01", t.METRIC)] == [{"step": 1, "loss": 2.0}]


def test_unreachable_redis_is_a_clear_error(tmp_path):
    cfg = tmp_path / "tw.yaml"
    cfg.write_text("redis_url: redis://127.0.0.1:1/0\n")
    proc = run_cli(cfg, "runs")
    assert proc.returncode == 1
    assert "Redis unreachable" in proc.stderr
    assert "--redis-url" in proc.stderr  # and what to do about it


@pytest.mark.parametrize("daemon", ["dispatcher", "worker", "bot"])
def test_a_daemon_started_while_redis_is_down_says_so_in_one_line(tmp_path, daemon):
    """Its supervisor starts it again; a traceback would bury the one thing to do."""
    cfg = tmp_path / "tw.yaml"
    cfg.write_text(f"redis_url: redis://127.0.0.1:1/0\nevidence_dir: {tmp_path}/evidence\n")
    proc = run_cli(cfg, daemon)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if " INFO " not in line and " WARNING " not in line]
    assert len(errors) == 2 and "Redis unreachable" in errors[0] and "--redis-url" in errors[1], proc.stderr


def test_a_worker_logs_no_per_job_rq_lines_at_the_default_level(store, settings_file):
    """RQ logs ~4 INFO lines per job; at INFO (`--log-level` given after the subcommand) they stay out."""
    store.append([metric("exp01", 1, loss=1.0), metric("exp02", 1, loss=1.0)])
    queue = Queue(QUEUE_NAME, connection=store.redis)
    dispatcher = Dispatcher(store=store, queue=queue, consumer="d1")  # in-process: it logs nothing per job
    dispatcher.setup()
    dispatcher.run(burst=True)
    assert queue.count >= 1  # jobs for the worker
    worked = run_cli(settings_file, "worker", "--burst", "--log-level", "INFO")
    assert worked.returncode == 0, worked.stderr
    assert queue.count == 0 and events_of(store, "exp01", t.POLICY_APPLIED)  # the jobs ran
    out = worked.stdout + worked.stderr
    assert " INFO " in out  # trainwarden's own INFO lines are there: the level took
    assert not re.search(r"rq\.\S+ INFO|Job OK|Successfully completed", out), out


def test_output_to_a_reader_that_went_away_ends_quietly(tmp_path):
    """`trainwarden ... | head`: the reader closes the pipe; no BrokenPipeError traceback, exit 141 as after SIGPIPE."""
    settings = tmp_path / "tw.yaml"
    settings.write_text("redis_url: redis://127.0.0.1:1/0\n")  # never reached
    proc = subprocess.Popen(cli_argv(settings, "policy", "show"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO)  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before it writes: its first write meets a closed pipe
    with proc.stderr:
        err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141
    assert err == b""


def test_replay_and_stop_of_a_misspelt_run_name_the_run_meant(store, settings_file):
    store.append([metric("nc-nan", 1, loss=1.0), metric("exp01", 1, loss=1.0)])
    for command in ("replay", "check", "stop"):
        proc = run_cli(settings_file, command, "nc-nam")
        assert proc.returncode == 1, proc
        assert "unknown run 'nc-nam': it has no events; did you mean 'nc-nan'?" in proc.stderr, proc.stderr
    assert "did you mean" not in run_cli(settings_file, "replay", "zzzzzz").stderr  # nothing close: no guess


def test_health_shows_no_error_for_the_notifier_holding_its_lease(settings_file, tmp_path):
    """Holding the notifier lease is the bot's normal state: logged, but never its LAST ERROR in `health`."""
    settings = yaml.safe_load(settings_file.read_text())
    settings_file.write_text(yaml.safe_dump({**settings, "heartbeat_interval_s": 0.2}))
    client = redis.Redis.from_url(settings["redis_url"])
    log = tmp_path / "bot.log"
    bot = spawn(settings_file, log, "bot", env={"SLACK_BOT_TOKEN": ""})  # the console notifier
    try:
        wait_for(lambda: "holds the notifier lease" in log.read_text(), timeout=60, what="the bot holding its lease")
        seen = time.time()
        wait_for(lambda: [b for b in read_beats(client, Keys()) if b.role == "notifier" and b.ts > seen + 0.5],
                 timeout=60, what="a heartbeat of the bot written after it took the lease")  # fmt: skip
        health = run_cli(settings_file, "health")
    finally:
        stop_process(bot)
    (line,) = [line for line in health.stdout.splitlines() if line.startswith("notifier@")]
    assert "notifier lease" not in health.stdout, health.stdout
    assert line.split()[-2:] == ["-", "OK"], health.stdout  # LAST ERROR "-", STATUS OK

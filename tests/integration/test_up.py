"""`trainwarden up`'s supervision with real (small) processes; the four real daemons under `up` are
tested by tests/integration/test_quickstart.py, which runs the README's quick start."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import threading
from pathlib import Path

import pytest
from trainwarden.core.errors import UpError
from trainwarden.events.heartbeat import Heartbeat
from trainwarden.events.store import EventStore

from trainwarden.settings import Settings
from trainwarden.tools.redis_server import free_port
from trainwarden.up import (
    DAEMONS,
    Child,
    Supervisor,
    already_running,
    console_line,
    daemon_argv,
    ensure_redis,
    local_redis,
    metrics_url,
)


def supervisor(tmp_path: Path, **argvs: list[str]) -> tuple[Supervisor, io.StringIO]:
    out = io.StringIO()
    return Supervisor([Child(name, argv, tmp_path / "logs" / f"{name}.log") for name, argv in argvs.items()],
                      out=out), out  # fmt: skip


def test_a_child_that_exits_is_reported_and_the_others_are_stopped(tmp_path: Path):
    sup, out = supervisor(tmp_path, sleeper=["sleep", "60"],
                          crasher=[sys.executable, "-c", "import time; print('boom', flush=True); time.sleep(0.3); "
                                   "raise SystemExit(3)"])  # fmt: skip
    sup.start()
    assert sup.run(stop=threading.Event(), hurry=threading.Event(), news=lambda: None) == 1
    assert all(c.proc is not None and c.proc.poll() is not None for c in sup.children)  # the sleeper too
    text = out.getvalue()
    assert re.search(r"^crasher +\| boom$", text, re.M)  # the merged view, prefixed
    assert f"crasher exited with status 3 (its log: {tmp_path / 'logs' / 'crasher.log'})" in text
    assert "boom" in (tmp_path / "logs" / "crasher.log").read_text()  # and its own file


def test_stop_sends_sigterm_then_a_second_ctrl_c_kills_what_is_left(tmp_path: Path):
    stubborn = ["bash", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"]
    sup, out = supervisor(tmp_path, polite=["sleep", "60"], stubborn=stubborn)
    sup.start()
    stop, hurry = threading.Event(), threading.Event()
    ready = lambda: "ready" in out.getvalue()  # noqa: E731
    stop_when_ready = lambda: stop.set() if ready() else None  # noqa: E731
    done: list[int] = []
    runner = threading.Thread(target=lambda: done.append(sup.run(stop=stop, hurry=hurry, news=stop_when_ready)))
    runner.start()
    polite, stubborn = (c.proc for c in sup.children)
    assert polite is not None and stubborn is not None
    polite.wait(timeout=10)  # SIGTERM ends it
    assert polite.returncode == -15 and stubborn.poll() is None  # the other ignores SIGTERM ...
    hurry.set()  # ... until the second Ctrl-C
    runner.join(timeout=10)
    assert done == [0] and stubborn.returncode == -9
    assert "killing stubborn" in out.getvalue()
    assert out.getvalue().rstrip().endswith("all stopped (exit statuses: polite -15, stubborn -9)")


def test_daemons_get_the_same_settings_as_up():
    args = argparse.Namespace(config=Path("conf/tw.yaml"), redis_url="redis://h:1/0", log_level="WARNING")
    assert daemon_argv(args, "worker") == [sys.executable, "-m", "trainwarden", "--config",
                                           str(Path("conf/tw.yaml").resolve()), "--redis-url", "redis://h:1/0",
                                           "--log-level", "WARNING", "--log-format", "text", "worker"]  # fmt: skip
    bare = argparse.Namespace(config=None, redis_url=None, log_level="INFO", log_format="json")
    assert daemon_argv(bare, "bot")[3:] == ["--log-level", "INFO", "--log-format", "json", "bot"]


def test_each_daemon_gets_its_own_metrics_port_in_the_documented_order():
    args = argparse.Namespace(config=None, redis_url=None, log_level="INFO", log_format="text", metrics_port=9400,
                              metrics_host="127.0.0.1")  # fmt: skip
    ports = {name: daemon_argv(args, name)[-3] for name in DAEMONS}
    assert ports == {"agent": "9400", "dispatcher": "9401", "worker": "9402", "bot": "9403"}
    assert daemon_argv(args, "worker")[-5:] == ["worker", "--metrics-port", "9402", "--metrics-host", "127.0.0.1"]
    assert metrics_url(daemon_argv(args, "bot")) == "http://127.0.0.1:9403/metrics"
    args.metrics_host = "::1"
    assert metrics_url(daemon_argv(args, "agent")) == "http://[::1]:9400/metrics"


def test_only_a_plain_redis_on_this_machine_is_started():
    assert local_redis("redis://127.0.0.1:6379/0") == (6379, None)
    assert local_redis("redis://:pw@localhost/0") == (6379, "pw")
    assert local_redis("redis://db.lab:6379/0") is None
    assert local_redis("rediss://127.0.0.1:6380/0") is None  # TLS: not a server `up` can start
    assert local_redis("redis+cluster://127.0.0.1:7000/0") is None


def test_without_redis_up_says_how_to_start_one(tmp_path: Path):
    settings = Settings(redis_url=f"redis://127.0.0.1:{free_port()}/0", data_dir=tmp_path)
    with pytest.raises(UpError, match=r"trainwarden up --redis.*redis-server --port \d+ --appendonly yes --dir"):
        ensure_redis(settings, start=False, say=print)
    remote = Settings(redis_url=f"rediss://127.0.0.1:{free_port()}/0", data_dir=tmp_path)  # TLS: not one to start
    with pytest.raises(UpError, match=r"start it there \(AOF on\), or point REDIS_URL at one that runs"):
        ensure_redis(remote, start=True, say=print)  # --redis starts only a local one


def test_a_second_agent_or_bot_on_this_host_is_refused(store: EventStore):
    beat = Heartbeat(store.redis, store.keys, role="agent", host="h1", version="t")
    beat.beat(force=True)  # this test's pid: alive, on this machine
    Heartbeat(store.redis, store.keys, role="worker", host="h1", version="t").beat(force=True)  # workers: many is fine
    Heartbeat(store.redis, store.keys, role="agent", host="h2", version="t").beat(force=True)  # another host's
    assert already_running(store, "h1") == [f"agent (pid {os.getpid()} on h1)"]
    Heartbeat(store.redis, store.keys, role="notifier", host="h2", version="t").beat(force=True)
    # the bot is named as `up` names it ("bot | ..." lines), not by its heartbeat's role
    assert already_running(store, "h1") == [f"agent (pid {os.getpid()} on h1)", f"bot (pid {os.getpid()} on h2)"]
    assert already_running(store, "h3") == [f"bot (pid {os.getpid()} on h2)"]


def test_a_console_that_goes_away_does_not_block_the_daemons(tmp_path: Path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # `trainwarden up | head` after head exited
    talker = [sys.executable, "-c", "[print('y' * 99) for _ in range(3000)]"]
    out = os.fdopen(write_end, "w")
    sup = Supervisor([Child("talker", talker, tmp_path / "talker.log")], out=out)
    sup.start()
    try:
        assert sup.run(stop=threading.Event(), hurry=threading.Event(), news=lambda: None) == 1  # it ended by itself
    finally:
        with contextlib.suppress(OSError):
            out.close()
    assert sup.children[0].proc is not None and sup.children[0].proc.returncode == 0  # 300 KB: not blocked on a pipe
    assert (tmp_path / "talker.log").read_text().count("y" * 99) == 3000


def test_a_json_console_passes_json_lines_on_and_wraps_the_rest():
    own = '{"time": "2026-01-01T00:00:00.000Z", "daemon": "worker", "message": "x"}'
    assert console_line("worker", own) == own
    wrapped = json.loads(console_line("worker", "Traceback (most recent call last):"))
    assert wrapped["message"] == "Traceback (most recent call last):"
    assert (wrapped["daemon"], wrapped["logger"]) == ("worker", "stderr")
    said = json.loads(console_line("up", "{not json"))
    assert (said["daemon"], said["logger"], said["level"]) == ("up", "trainwarden.up", "INFO")

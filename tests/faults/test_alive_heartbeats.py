"""Heartbeats that mean alive: a notifier waiting out a storm of Slack 429s (Retry-After far longer than
the silence threshold) is not posted as SILENT and says what it waits for; a clean restart of
`trainwarden up` posts no alarm.

Real redis-server, the real dispatcher and bot (and all four daemons under `trainwarden up`) as
processes; Slack is the local Web API server (tests/slack_api.py) answering 429 with Retry-After."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.heartbeat import SILENT_INTERVALS, read_beat
from trainwarden.events.store import EventStore

from tests.conftest import spawn, stop_process
from tests.helpers import events_of, wait_for
from tests.slack_api import SlackAPI
from trainwarden.tools.redis_server import free_port

pytestmark = [pytest.mark.redis, pytest.mark.slow]

INTERVAL_S = 0.25  # silent after 3 of them: 0.75 s
RETRY_AFTER_S = 2
STORM = 6  # 429s in a row: 12 s of Retry-After, 16 silence thresholds (a 60 s storm is 2 at the default 10 s)
ALARMS = ("SILENT", "BACK", "STALLED", "RECOVERED")


@pytest.fixture
def storm_api() -> Iterator[SlackAPI]:
    api = SlackAPI(retry_after=RETRY_AFTER_S)
    yield api
    api.close()


def settings_for(tmp_path: Path, redis_url: str, **extra: object) -> Path:
    path = tmp_path / "trainwarden.yaml"
    body = {"redis_url": redis_url, "host": "testhost", "heartbeat_interval_s": INTERVAL_S,
            "evidence_dir": str(tmp_path / "evidence"), "findings_file": str(tmp_path / "findings.md"),
            "agent": {"state_file": str(tmp_path / "offsets.json"), "nvml": False},
            "workers": {"reclaim_idle_s": 1}, **extra}  # fmt: skip
    path.write_text(yaml.safe_dump(body))
    return path


def silences(store: EventStore) -> list[str]:
    return [str(e.data["component"]) for e in events_of(store, t.SYSTEM_RUN, t.COMPONENT_SILENT)]


def test_a_429_storm_longer_than_the_silence_threshold_posts_no_false_silent(
    redis_server, r: redis.Redis, store: EventStore, storm_api: SlackAPI, tmp_path: Path
) -> None:
    slack = {"channel": "C1", "rate_per_s": 1000, "burst": 1000, "http_host": "127.0.0.1", "http_port": free_port(),
             "deadman_s": 3600}  # fmt: skip
    settings = settings_for(tmp_path, redis_server.url, slack=slack)
    env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s3cret", "SLACK_API_URL": storm_api.url}
    procs = [spawn(settings, tmp_path / "dispatcher.log", "dispatcher"),
             spawn(settings, tmp_path / "bot.log", "bot", env=env)]  # fmt: skip
    try:
        wait_for(lambda: read_beat(r, store.keys, "notifier@testhost") and read_beat(r, store.keys,
                 "dispatcher@testhost"), timeout=60, what="both beating")  # fmt: skip
        storm_api.fail("chat.postMessage", *["429"] * STORM)
        stop = make_event(t.DECISION, run="storm", host="worker", producer="eval/storm", seq=1, ts=time.time(),
                          data={"run_host": "gpu1", "decision": "STOP", "rule": "loss-nonfinite",
                                "reason": "loss=nan at step 3", "values": {"step": 3}})  # fmt: skip
        began = time.monotonic()
        store.append([stop])

        def waiting_said() -> str | None:
            beat = read_beat(r, store.keys, "notifier@testhost")
            return beat.notice if beat is not None and beat.notice and "Retry-After" in beat.notice else None

        notice = wait_for(waiting_said, timeout=30, what="the notifier saying it waits out Retry-After")
        assert notice.startswith(f"waiting out Slack's Retry-After {RETRY_AFTER_S} s (chat.postMessage to C1)")
        wait_for(lambda: any(m.key == stop.id for m in storm_api.messages), timeout=120, what="the STOP posted")
        storm_s = time.monotonic() - began
        time.sleep(SILENT_INTERVALS * INTERVAL_S * 4)  # a silence noticed late would be recorded by now
        false_silent = silences(store)
        print(f"MEASURED: {storm_api.count('chat.postMessage:429')} answers 429 (Retry-After {RETRY_AFTER_S}s) over "
              f"{storm_s:.1f}s, silence threshold {SILENT_INTERVALS * INTERVAL_S:.2f}s: "
              f"{len(false_silent)} false SILENT")  # fmt: skip
        assert storm_api.count("chat.postMessage:429") == STORM
        assert storm_s >= STORM * RETRY_AFTER_S
        assert false_silent == []
        assert not [text for text in storm_api.texts() if text.startswith(ALARMS)]
    finally:
        for proc in procs:
            stop_process(proc)
        print("--- bot.log\n" + (tmp_path / "bot.log").read_text(errors="replace")[-3000:])


def test_a_clean_restart_of_up_posts_no_alarm(redis_server, r: redis.Redis, store: EventStore,
                                              tmp_path: Path) -> None:  # fmt: skip
    """Ctrl-C, a pause longer than the silence threshold and the dead-man's switch, `up` again: the
    daemons recorded that the operator stopped them, so nothing is SILENT, STALLED, BACK or RECOVERED."""
    settings = settings_for(tmp_path, redis_server.url, slack={"deadman_s": 2})
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}

    def up(n: int) -> tuple[subprocess.Popen[bytes], Path]:
        log = tmp_path / f"up{n}.log"
        with open(log, "wb") as sink:
            proc = subprocess.Popen([sys.executable, "-m", "trainwarden", "--config", str(settings), "up", "--logs",
                                     str(tmp_path / "logs")], stdout=sink, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, env=env)  # fmt: skip
        wait_for(lambda: "all four daemons are running" in log.read_text() or proc.poll() is not None, timeout=90,
                 what="up: all four daemons running")  # fmt: skip
        assert proc.poll() is None, log.read_text()
        return proc, log

    def ctrl_c(proc: subprocess.Popen[bytes]) -> None:
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 0

    first, _ = up(1)
    time.sleep(1)
    ctrl_c(first)
    down = time.monotonic()
    time.sleep(4)  # over 5 silence thresholds (0.75 s) and twice the dead-man's switch (2 s)
    second, log = up(2)
    print(f"restarted after {time.monotonic() - down:.1f}s down")
    try:
        time.sleep(6)  # three times the dead-man's switch: an alarm would be posted by now
    finally:
        ctrl_c(second)
    console = log.read_text(errors="replace")
    posted = [line for line in console.splitlines() if "bot" in line and any(f"] {a}" in line for a in ALARMS)]
    stalls = [e.type for e in events_of(store, t.SYSTEM_RUN) if e.type.startswith(("watchdog", "component"))]
    print(f"MEASURED: alarms posted after a clean restart of up: {len(posted)} ({stalls})")
    assert posted == [], console[-3000:]
    assert stalls == []

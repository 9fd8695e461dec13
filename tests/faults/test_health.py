"""Watching the watchdog: every daemon beats, `trainwarden health` tells a silent one, the bot posts
the silence and the recovery once each, and each daemon serves Prometheus metrics.

Real redis-server, the real agent, dispatcher, worker and bot (console mode) as processes."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml
from trainwarden.events import types as t
from trainwarden.events.heartbeat import read_beats
from trainwarden.events.store import EventStore

from tests.conftest import cli_argv, spawn, stop_process
from tests.helpers import events_of, nan_metric, wait_for
from trainwarden.cli.health import row
from trainwarden.tools.redis_server import free_port

INTERVAL_S = 0.25  # heartbeat interval: silent after 3 of them
ROLES = ("agent", "dispatcher", "worker", "notifier")


def sample(text: str, name: str) -> float:
    """The value of an unlabelled sample in a /metrics page (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return 0.0


@pytest.fixture
def fast_settings(settings_file: Path) -> Path:
    body = yaml.safe_load(settings_file.read_text())
    body["heartbeat_interval_s"] = INTERVAL_S
    body["agent"]["nvml"] = False
    settings_file.write_text(yaml.safe_dump(body))
    return settings_file


def health(settings: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_argv(settings, "health", *args), capture_output=True, text=True, timeout=30,
                          check=False)  # fmt: skip


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


class Daemons:
    """Daemons started as processes, each with a metrics port; stopped at teardown."""

    def __init__(self, settings: Path, directory: Path) -> None:
        self.settings, self.directory = settings, directory
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: dict[str, int] = {}

    def log(self, role: str) -> Path:
        return self.directory / f"{role}.log"

    def start(self, *roles: str) -> None:
        for role in roles:
            self.ports.setdefault(role, free_port())
            command = "bot" if role == "notifier" else role
            self.procs[role] = spawn(self.settings, self.log(role), command, "--metrics-port", str(self.ports[role]))

    def kill(self, role: str) -> None:
        os.killpg(self.procs[role].pid, 9)
        self.procs[role].wait()

    def stop(self) -> None:
        for proc in self.procs.values():
            stop_process(proc)


@pytest.fixture
def daemons(fast_settings: Path, tmp_path: Path, r: redis.Redis) -> Iterator[Daemons]:
    running = Daemons(fast_settings, tmp_path)
    yield running
    running.stop()


def statuses(store: EventStore) -> dict[str, str]:
    """role -> OK/SILENT, read in-process the way `trainwarden health` reads it (cheap to poll)."""
    now = time.time()
    return {b.role: row(b, now)["status"] for b in read_beats(store.redis, store.keys)}  # type: ignore[arg-type]


def all_ok(store: EventStore, roles: tuple[str, ...] = ROLES) -> bool:
    return statuses(store) == dict.fromkeys(roles, "OK")


def test_health_silence_recovery_and_metrics(fast_settings: Path, daemons: Daemons, store: EventStore) -> None:
    daemons.start(*ROLES)
    wait_for(lambda: all_ok(store), timeout=40, what="every daemon alive")
    table = health(fast_settings)
    assert table.returncode == 0, table.stdout + table.stderr
    for role in ROLES:
        assert f"{role}@testhost" in table.stdout
    assert "SILENT" not in table.stdout
    check_metrics(daemons)
    store.append([nan_metric("exp-metrics", 1)])  # a STOP decision, and its post
    decided = 'trainwarden_decisions_total{decision="STOP",rule="loss-nonfinite"} 1.0'
    wait_for(lambda: decided in scrape(daemons.ports["worker"]), timeout=20, what="the decision counted")
    wait_for(lambda: sample(scrape(daemons.ports["notifier"]), "trainwarden_slack_posts_total") >= 1, timeout=20,
             what="the post counted")  # fmt: skip

    daemons.kill("worker")
    wait_for(lambda: statuses(store).get("worker") == "SILENT", timeout=15, what="worker silent")
    silent = health(fast_settings, "--json")
    assert silent.returncode == 1
    assert {r["role"]: r["status"] for r in json.loads(silent.stdout)} == {
        **dict.fromkeys(ROLES, "OK"),
        "worker": "SILENT",
    }
    wait_for(lambda: events_of(store, t.SYSTEM_RUN, t.COMPONENT_SILENT), timeout=15, what="component.silent")
    bot_log = daemons.log("notifier")
    wait_for(lambda: "SILENT: the worker on testhost" in bot_log.read_text(), timeout=15, what="the silence posted")

    daemons.start("worker")
    wait_for(lambda: events_of(store, t.SYSTEM_RUN, t.COMPONENT_RECOVERED), timeout=30, what="component.recovered")
    wait_for(lambda: "BACK: the worker on testhost" in bot_log.read_text(), timeout=15, what="the recovery posted")
    wait_for(lambda: all_ok(store), timeout=15, what="all OK again")
    # one event and one post per transition, though three processes watch
    assert len(events_of(store, t.SYSTEM_RUN, t.COMPONENT_SILENT)) == 1
    assert len(events_of(store, t.SYSTEM_RUN, t.COMPONENT_RECOVERED)) == 1
    text = bot_log.read_text()
    assert text.count("SILENT: the worker") == 1 and text.count("BACK: the worker") == 1


def check_metrics(daemons: Daemons) -> None:
    common = ("trainwarden_heartbeat_age_seconds", "trainwarden_component_up", "trainwarden_dead_letters",
              "trainwarden_feed_pending_entries", "trainwarden_lag_seconds", "trainwarden_redis_up 1.0")  # fmt: skip
    expected = {
        "agent": ("trainwarden_spool_bytes",),
        "dispatcher": ("trainwarden_jobs_queued",),
        "worker": (
            "trainwarden_jobs_total",
            "trainwarden_decisions_total",
            "trainwarden_stop_requests_total",
            "trainwarden_stops_total",
        ),
        "notifier": ("trainwarden_slack_posts_total", "trainwarden_slack_post_failures_total"),
    }
    for role, port in daemons.ports.items():
        text = scrape(port)
        for name in (*common, *expected[role]):
            assert name in text, f"{name} missing from the {role}'s /metrics"
        assert 'component_up{component="worker@testhost",host="testhost",role="worker"} 1.0' in text


def test_notifier_down_is_seen_by_others(fast_settings: Path, daemons: Daemons, store: EventStore) -> None:
    """The notifier cannot post its own death: health exits 1, another daemon's metric shows it, the
    dispatcher records the event, and the notifier posts it once it runs again."""
    daemons.start("dispatcher", "notifier")
    wait_for(lambda: all_ok(store, ("dispatcher", "notifier")), timeout=30, what="both alive")
    daemons.kill("notifier")
    wait_for(lambda: statuses(store).get("notifier") == "SILENT", timeout=15, what="notifier silent")
    assert health(fast_settings).returncode == 1
    down = 'trainwarden_component_up{component="notifier@testhost",host="testhost",role="notifier"} 0.0'
    assert down in scrape(daemons.ports["dispatcher"])
    silent = wait_for(lambda: events_of(store, t.SYSTEM_RUN, t.COMPONENT_SILENT), timeout=15, what="silent event")
    assert silent[0].data["component"] == "notifier@testhost"
    daemons.start("notifier")
    log = daemons.log("notifier")
    wait_for(lambda: "SILENT: the notifier on testhost" in log.read_text(), timeout=30, what="its silence posted")
    wait_for(lambda: "BACK: the notifier on testhost" in log.read_text(), timeout=30, what="its recovery posted")
    replay = subprocess.run(cli_argv(fast_settings, "replay", t.SYSTEM_RUN), capture_output=True, text=True,
                            timeout=30, check=False)  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    assert "notifier@testhost (pid" in replay.stdout and "beats again after" in replay.stdout


def test_metrics_needs_the_extra_in_one_line(fast_settings: Path, tmp_path: Path) -> None:
    """Without prometheus-client, --metrics-port says which extra to install, in one line."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "prometheus_client.py").write_text("raise ModuleNotFoundError(name='prometheus_client')\n")
    env = {**os.environ, "PYTHONPATH": str(blocker)}
    done = subprocess.run(cli_argv(fast_settings, "dispatcher", "--metrics-port", str(free_port())),
                          capture_output=True, text=True, timeout=30, env=env, check=False)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "trainwarden dispatcher needs prometheus_client: pip install 'trainwarden[metrics]'"
    ), done.stderr

"""Each daemon's port: `/metrics` complete before any event, `/healthz`, `/readyz`, and 404 elsewhere.

Real processes (dispatcher, worker, bot in console mode) on a redis-server of this test's own, which the
test stops: `/readyz` turns 503 and says why while `/healthz` stays 200, and both are 200 once it is back."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.heartbeat import SILENT_INTERVALS
from trainwarden.events.keys import Keys
from trainwarden.events.latency import BUCKETS
from trainwarden.events.store import EventStore

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import wait_for
from trainwarden.tools.redis_server import RedisServer, free_port
from trainwarden.up import DAEMONS as UP_ORDER

COMMANDS = ("dispatcher", "worker", "bot")
INTERVAL_S = 1.0  # heartbeat interval: /healthz fails after SILENT_INTERVALS of them without a pass


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:  # not listening yet
        return 0, str(exc)


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)], through prometheus-client's own parser (invalid exposition raises)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


class Running:
    def __init__(self, redis_server: RedisServer, settings: Path, directory: Path) -> None:
        self.redis_server, self.settings, self.directory = redis_server, settings, directory
        self.ports = {command: free_port() for command in COMMANDS}
        self.procs = {c: spawn(settings, directory / f"{c}.log", c, "--metrics-port", str(port))
                      for c, port in self.ports.items()}  # fmt: skip

    def restart_redis(self) -> None:
        """The same data and port, as after a Redis restart."""
        self.redis_server = RedisServer(self.redis_server.directory, port=self.redis_server.port).start()

    def logs(self) -> str:
        return "\n".join(f"--- {c}\n{(self.directory / f'{c}.log').read_text()[-2000:]}" for c in COMMANDS)

    def all_answer(self, path: str, status: int) -> bool:
        return all(get(port, path)[0] == status for port in self.ports.values())


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    server = RedisServer(tmp_path / "redis").start()
    settings = tmp_path / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": server.url, "host": "testhost", "heartbeat_interval_s": INTERVAL_S,
        "evidence_dir": str(tmp_path / "evidence"), "findings_file": str(tmp_path / "findings.md"),
        "workers": {"reclaim_idle_s": 1, "lock_timeout_s": 2},
    }))  # fmt: skip
    daemons = Running(server, settings, tmp_path)
    try:
        yield daemons
    finally:
        for proc in daemons.procs.values():
            stop_process(proc)
        daemons.redis_server.stop()


def test_metrics_are_all_there_before_the_first_event(running: Running) -> None:
    wait_for(lambda: running.all_answer("/readyz", 200), timeout=60, what=f"every /readyz 200\n{running.logs()}")
    worker = samples(get(running.ports["worker"], "/metrics")[1])
    decisions = {(labels["rule"], labels["decision"]): value for labels, value in worker["trainwarden_decisions_total"]}
    assert decisions and set(decisions.values()) == {0.0}  # every rule of the policy, at 0, with its labels
    assert {d for _, d in decisions} == {"STOP", "WAIT"}
    rules = {rule for rule, _ in decisions}
    assert {labels["rule"] for labels, _ in worker["trainwarden_stop_requests_total"]} == rules
    assert worker["trainwarden_stops_total"] == [({"outcome": "done"}, 0.0), ({"outcome": "failed"}, 0.0)]
    latency = worker["trainwarden_decision_latency_seconds_count"]
    assert sorted(latency, key=str) == [({"decision": "STOP"}, 0.0), ({"decision": "WAIT"}, 0.0)]
    bot = samples(get(running.ports["bot"], "/metrics")[1])
    assert bot["trainwarden_slack_posts_total"] == [({}, 0.0)]
    assert ({"error": "SlackRejected"}, 0.0) in bot["trainwarden_slack_post_failures_total"]
    for command, port in running.ports.items():
        found = samples(get(port, "/metrics")[1])
        [(build, one)] = found["trainwarden_build_info"]
        assert one == 1.0 and build["version"] and build["python"].count(".") == 2, command
        assert found["process_resident_memory_bytes"][0][1] > 0, command
        assert "python_info" in found and "python_gc_objects_collected_total" in found, command
        request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                         headers={"Accept": "application/openmetrics-text; version=1.0.0"})  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as response:
            strict = list(openmetrics_families(response.read().decode()))  # the stricter format's parser: valid too
        assert {"trainwarden_build_info", "trainwarden_dead_letters"} <= {f.name for f in strict}, command


def test_probes_and_paths(running: Running) -> None:
    wait_for(lambda: running.all_answer("/readyz", 200), timeout=60, what=f"every /readyz 200\n{running.logs()}")
    for command, port in running.ports.items():
        status, body = get(port, "/healthz")
        assert (status, body.strip()) == (200, f"{'notifier' if command == 'bot' else command}@testhost: alive")
        assert get(port, "/readyz")[1].startswith(f"{'notifier' if command == 'bot' else command}@testhost: ready")
        status, body = get(port, "/metric")  # a typo in a scrape config
        assert status == 404 and "/metrics, /healthz or /readyz" in body
        assert get(port, "/")[0] == 404
    running.redis_server.stop()
    wait_for(lambda: running.all_answer("/readyz", 503), timeout=30, what="every /readyz 503 once Redis is gone")
    for port in running.ports.values():
        assert "Redis does not answer" in get(port, "/readyz")[1]
    outage_end = time.monotonic() + 1.5 * SILENT_INTERVALS * INTERVAL_S  # past the bound /healthz holds a loop to
    while time.monotonic() < outage_end:  # alive all along: the loops wait Redis out
        assert running.all_answer("/healthz", 200), [get(port, "/healthz") for port in running.ports.values()]
    running.restart_redis()
    wait_for(lambda: running.all_answer("/readyz", 200), timeout=60, what=f"ready again\n{running.logs()}")


def free_ports(n: int) -> int:
    """A base port with the n ports from it free now."""
    for _ in range(50):
        base = free_port()
        try:
            for port in range(base, base + n):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise AssertionError(f"no {n} consecutive free ports")


def test_up_gives_each_daemon_its_port_and_its_json_log(settings_file: Path, r: redis.Redis, tmp_path: Path) -> None:
    base, logs, out = free_ports(4), tmp_path / "logs", tmp_path / "up.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "TRAINWARDEN_LOG_"))}
    argv = cli_argv(settings_file, "--log-level", "info", "--log-format", "json",  # the last --log-level wins
                    "up", "--logs", str(logs), "--metrics-port", str(base))  # fmt: skip
    with open(out, "ab") as sink:
        up = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              start_new_session=True, env=env, cwd=REPO)  # fmt: skip
    try:
        urls = ", ".join(f"{name} http://127.0.0.1:{base + i}/metrics" for i, name in enumerate(UP_ORDER))
        wait_for(lambda: f"metrics, /healthz and /readyz: {urls}" in out.read_text(), timeout=30, what="the URLs")
        ports = [base + i for i in range(len(UP_ORDER))]
        wait_for(lambda: all(get(port, "/readyz")[0] == 200 for port in ports), timeout=60,
                 what=f"every daemon of up ready\n{out.read_text()[-3000:]}")  # fmt: skip
        assert [get(port, "/healthz")[1].split(":")[0] for port in ports] == [
            "agent@testhost", "dispatcher@testhost", "worker@testhost", "notifier@testhost"]  # fmt: skip
    finally:
        stop_process(up)
    console = [json.loads(line) for line in out.read_text().splitlines()]  # up's console: JSON lines, no prefixes
    assert {line["daemon"] for line in console} == {"up", *UP_ORDER}
    for name in UP_ORDER:
        lines = (logs / f"{name}.log").read_text().splitlines()
        parsed = [json.loads(line) for line in lines]  # every line of the file, up's own first line included
        assert parsed[0]["daemon"] == "up" and {p["daemon"] for p in parsed[1:]} == {name}, lines


def test_decision_latency_is_observed_from_the_events_timestamp(running: Running) -> None:
    """A NaN metric stamped 2 s before it is appended: the worker's STOP is observed at 2 s or more (the event's
    timestamp, not the append or the job, starts the clock), in the Grafana buckets, the sum in seconds."""
    wait_for(lambda: running.all_answer("/readyz", 200), timeout=60, what=f"every /readyz 200\n{running.logs()}")
    store = EventStore(running.redis_server.client(), keys=Keys())
    nan = make_event(t.METRIC, run="late", host="gpu1", producer="gpu1/log/late/g0", seq=1,
                     data={"step": 1, "loss": math.nan}, ts=time.time() - 2.0)  # fmt: skip
    store.append([nan])
    port = running.ports["worker"]

    def stop_counted() -> bool:
        counts = dict((s[0]["decision"], s[1]) for s in samples(get(port, "/metrics")[1]).get(
            "trainwarden_decision_latency_seconds_count", []))  # fmt: skip
        return counts.get("STOP") == 1.0

    wait_for(stop_counted, timeout=60, what=f"the STOP's latency observed\n{running.logs()}")
    found = samples(get(port, "/metrics")[1])
    buckets = {labels["le"]: value for labels, value in found["trainwarden_decision_latency_seconds_bucket"]
               if labels["decision"] == "STOP"}  # fmt: skip
    assert [float(le) for le in buckets if le != "+Inf"] == list(BUCKETS)
    assert buckets["1.0"] == 0.0 and buckets["+Inf"] == 1.0
    [(_, total)] = [s for s in found["trainwarden_decision_latency_seconds_sum"] if s[0]["decision"] == "STOP"]
    assert 2.0 <= total < 60.0

"""A real training loop under the real agent and worker (real Redis): its steps slow down 3x mid-run (its data
reader starts sleeping) and the throughput rule warns with the rates the loop itself measured; a steady run stays
quiet. The rule's windows are seconds here instead of minutes; the kind is the default policy's."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trainwarden.agent.publisher import Publisher
from trainwarden.agent.runner import Agent, AgentConfig
from trainwarden.agent.watch import RunWatch
from trainwarden.events import types as t
from trainwarden.workers import context
from trainwarden.workers.policy_source import PolicySource
from trainwarden.workers.process import process_run

from tests.helpers import events_of

pytestmark = pytest.mark.redis

POLICY = """\
name: throughput-test
rules:
  - id: throughput-drop
    kind: throughput
    fraction: 0.5
    window: 4s
    sustained: 2s
    warmup: 1500ms
    span: 1s
    min_samples: 3
    severity: warning
"""

# a training loop: each step "computes" 50 ms; from `slow_from` s on, its reader sleeps 100 ms more per batch
LOOP = """\
import json, sys, time
seconds, slow_from, times_path = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
start = time.monotonic()
stamps = []
step = 0
while (now := time.monotonic() - start) < seconds:
    if now >= slow_from:
        time.sleep(0.1)  # the reader: a batch now takes 3x as long to arrive
    time.sleep(0.05)
    step += 1
    stamps.append(time.monotonic() - start)
    print(f"step={step} loss={2.0 / step ** 0.5:.4f}", flush=True)
json.dump(stamps, open(times_path, "w"))
"""


def _rate(stamps: list[float], start: float, end: float) -> float:
    inside = [s for s in stamps if start <= s < end]
    return (len(inside) - 1) / (inside[-1] - inside[0])


def _train(store, tmp_path: Path, worker_ctx, *, seconds: float, slow_from: float) -> tuple[list, list[float]]:
    """Run the loop watched by the agent, the worker judging as events come; the anomalies opened and the loop's
    own step times."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    context.install(dataclasses.replace(worker_ctx, policies=PolicySource(host="worker-test", path=policy)))
    script, log, times = tmp_path / "loop.py", tmp_path / "train.log", tmp_path / "times.json"
    script.write_text(LOOP)
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, str(script), str(seconds), str(slow_from), str(times)], stdout=out)
    agent = Agent(publisher=Publisher(store), host="gpu1", watches=[RunWatch(run="exp01", log=log, pid=proc.pid)],
                  config=AgentConfig(process_interval_s=0.5, heartbeat_interval_s=3600.0))  # fmt: skip
    judged = time.monotonic()
    while proc.poll() is None:
        agent.step()
        agent.flush()
        if time.monotonic() - judged >= 0.5:
            process_run("exp01", [])
            judged = time.monotonic()
        time.sleep(0.02)
    agent.step()
    agent.flush()
    process_run("exp01", [])
    return events_of(store, "exp01", t.ANOMALY_OPENED), json.loads(times.read_text())


def test_steps_3x_slower_mid_run_warn_with_the_measured_rate(store, tmp_path, worker_ctx):
    opened, stamps = _train(store, tmp_path, worker_ctx, seconds=10.0, slow_from=5.0)
    fast, slow = _rate(stamps, 2.0, 5.0), _rate(stamps, 5.5, 10.0)
    assert 2.5 < fast / slow < 3.5  # the loop did slow down 3x
    (anomaly,) = [e for e in opened if e.data["rule"] == "throughput-drop"]
    values = anomaly.data["values"]
    assert values["unit"] == "it/s"
    assert abs(values["level"] - fast) / fast < 0.2, (values, fast)
    assert abs(values["rate"] - slow) / slow < 0.2, (values, slow)
    assert anomaly.data["reason"].startswith(f"throughput fell to {round(100 * values['rate'] / values['level'])}% "
                                             "of its recent level (it/s ")  # fmt: skip
    # it opened once the drop had held `sustained` (2 s): after 5 s + the 1 s span + 2 s, not before
    metric_times = {e.id: e.ts for e in events_of(store, "exp01", t.METRIC)}
    first = min(metric_times.values())
    assert 7.0 <= metric_times[anomaly.data["trigger"]] - first < 9.5


def test_a_steady_run_stays_quiet(store, tmp_path, worker_ctx):
    opened, stamps = _train(store, tmp_path, worker_ctx, seconds=10.0, slow_from=99.0)
    assert len(stamps) > 120  # it trained all along (about 20 it/s)
    assert [e.data["rule"] for e in opened] == []

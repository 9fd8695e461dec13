"""A 100,000-character metric name once went through the agent into every event, the run state and the
evidence pack (a report of 2.2 MB). Names are capped at the producer (the value is left out of its event and
said once in the agent's log) and on read (an entry written straight into the stream with such a name is
dead-lettered, as is an entry over the size cap), so the run's real NaN is still stopped with a small pack.

Real redis-server; the real agent, dispatcher and worker as processes.
"""

import json
import os
import subprocess

import pytest
from trainwarden.core.limits import MAX_ENTRY_CHARS, MAX_NAME_CHARS
from trainwarden.events import types as t

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, metric, wait_for

pytestmark = [pytest.mark.redis]

LONG = "a" * 100_000


def test_a_100000_character_metric_name_is_left_out_and_the_nan_still_stops_with_a_small_pack(
    store, r, tmp_path, settings_file
):
    log = tmp_path / "exp01.log"
    lines = [f"step={s} loss={2.0 + s / 100:.3f}" for s in range(1, 6)]
    lines.insert(2, f"step=3 loss=2.03 {LONG}=1.5")
    log.write_text("\n".join([*lines, "step=6 loss=nan", ""]))
    # straight into the stream: a compact entry naming a long metric, and one over the size cap
    key = store.keys.log("exp01")
    forged = [
        r.xadd(key, {"e": json.dumps({"i": "forger/x:1", "s": 1003.0, "d": {"step": 2, LONG: 1.0}})}).decode(),
        r.xadd(
            key,
            {"e": json.dumps({"i": "forger/x:2", "s": 1003.0, "t": "log.line", "d": {"line": "x" * MAX_ENTRY_CHARS}})},
        ).decode(),
    ]

    procs = [spawn(settings_file, tmp_path / "agent.log", "agent", "--watch", f"exp01={log}"),
             *(spawn(settings_file, tmp_path / f"{name}.log", name) for name in ("dispatcher", "worker"))]  # fmt: skip
    try:
        wait_for(lambda: events_of(store, "exp01", t.EVIDENCE_BUILT), timeout=60, what="evidence.built")
    finally:
        for p in procs:
            stop_process(p)

    names = {name for e in events_of(store, "exp01", t.METRIC) for name in e.data}
    assert names and max(map(len, names)) <= MAX_NAME_CHARS, sorted(map(len, names))[-3:]
    assert "metric name of 100000 characters" in (tmp_path / "agent.log").read_text()
    letters = {d.sid: d.reason for d in store.dead_letters()}
    assert f"metric name of 100000 characters (at most {MAX_NAME_CHARS})" in letters[forged[0]], letters
    assert f"over {MAX_ENTRY_CHARS} characters" in letters[forged[1]], letters
    (stop,) = events_of(store, "exp01", t.STOP_REQUESTED)
    assert stop.data["reason"] == "loss=nan at step 6"
    reports = list((tmp_path / "evidence").rglob("report.md"))
    assert reports and all(p.stat().st_size < 100_000 for p in reports), [p.stat().st_size for p in reports]
    assert all(p.stat().st_size < 200_000 for p in (tmp_path / "evidence").rglob("evidence.json"))


def test_a_100000_character_host_or_rule_is_refused_at_start_and_dead_lettered_on_read(
    store, r, tmp_path, settings_file
):
    key = store.keys.log("exp01")
    anomaly = {"rule": LONG, "severity": "critical", "reason": "x", "decision": "STOP"}
    forged = [
        r.xadd(key, {"e": json.dumps({"i": "forger/x:1", "h": LONG, "s": 1003.0, "d": {"step": 1, "loss": 2.0}})}),
        r.xadd(key, {"e": json.dumps({"i": "forger/x:2", "s": 1003.0, "t": "anomaly.opened", "d": anomaly})}),
    ]
    store.append([metric("exp01", 3, step=3, loss=2.0)])
    procs = [spawn(settings_file, tmp_path / f"{name}.log", name) for name in ("dispatcher", "worker")]
    try:
        wait_for(lambda: len(store.dead_letters()) >= 2, timeout=30, what="the dead letters")
    finally:
        for p in procs:
            stop_process(p)
    letters = {d.sid: d.reason for d in store.dead_letters()}
    assert "host of 100000 characters (at most 255)" in letters[forged[0].decode()], letters
    assert f"rule of 100000 characters (at most {MAX_NAME_CHARS})" in letters[forged[1].decode()], letters
    assert not events_of(store, "exp01", t.STOP_REQUESTED)
    # at the producer: a daemon named after such a host refuses to start, in one line
    agent = subprocess.run(cli_argv(settings_file, "agent", "--burst"), env={**os.environ, "TRAINWARDEN_HOST": LONG},
                           capture_output=True, text=True, timeout=60, cwd=REPO, check=False)  # fmt: skip
    assert agent.returncode == 1, agent.stderr[-2000:]
    assert "TRAINWARDEN_HOST is 100000 characters long; a host name has at most 255" in agent.stderr
    assert len(agent.stderr.strip().splitlines()[-1]) < 200

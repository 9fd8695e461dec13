"""The policy in the worker, on a real Redis: hot reload, ticks for quiet runs, evidence, verify."""

import dataclasses
import math
import os

import pytest
from PIL import Image
from trainwarden.events import packfiles
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.workers import context
from trainwarden.workers.policy_source import PolicySource, last_recorded_policy
from trainwarden.workers.process import process_run
from trainwarden.workers.verify import verify_run

from tests.helpers import events_of, metric, nan_metric
from tests.ticking import FakeClock, settler

pytestmark = pytest.mark.redis

GN_WAIT = """\
name: team
rules:
  - {id: gn-high, kind: threshold, metric: grad_norm, above: 100, decision: WAIT}
"""
GN_STOP = GN_WAIT.replace("decision: WAIT", "decision: STOP").replace("above: 100", "above: 50")
BROKEN = GN_WAIT + "  - {id: oops, kind: spikes, metric: loss}\n  - {id: x, kind: absence, duration: 10 mins}\n"


@pytest.fixture
def policy_file(tmp_path, worker_ctx):
    path = tmp_path / "policy.yaml"
    path.write_text(GN_WAIT)
    ctx = dataclasses.replace(worker_ctx, policies=PolicySource(host="worker-test", path=path))
    context.install(ctx)
    return path


def rewrite(path, text):
    path.write_text(text)
    stat = path.stat()  # a new mtime even within the filesystem's timestamp granularity
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def decisions(store, run="exp01"):
    return [(e.data["decision"], e.data.get("rule"), e.data["policy"]) for e in events_of(store, run, t.DECISION)]


def test_hot_reload_applies_a_valid_file_and_keeps_the_old_policy_on_an_invalid_one(store, policy_file):
    old = PolicySource(host="x", path=policy_file).policy
    store.append([metric("exp01", 1, step=1, loss=1.0, grad_norm=1.0)])
    process_run("exp01", [])

    rewrite(policy_file, BROKEN)
    store.append([metric("exp01", 2, step=2, loss=1.0, grad_norm=70.0)])  # above 50 (new), not above 100 (old)
    process_run("exp01", [])
    (rejected,) = events_of(store, t.SYSTEM_RUN, t.POLICY_REJECTED)
    assert rejected.data["kept"] == old.hash
    assert [p.split(": ", 1)[0] for p in rejected.data["problems"]] == [f"{policy_file}:4:22", f"{policy_file}:5:38"]
    assert "unknown rule kind 'spikes'" in rejected.data["problems"][0]
    assert decisions(store) == [(t.CONTINUE, None, old.hash)]  # still the old policy: 70 is fine

    rewrite(policy_file, GN_STOP)
    store.append([metric("exp01", 3, step=3, loss=1.0, grad_norm=70.0)])
    process_run("exp01", [])
    new = PolicySource(host="x", path=policy_file).policy
    loaded = [e.data["policy"] for e in events_of(store, t.SYSTEM_RUN, t.POLICY_LOADED)]
    assert loaded == [old.hash, new.hash]
    assert decisions(store) == [(t.CONTINUE, None, old.hash), (t.STOP, "gn-high", new.hash)]
    applied = [(e.data["policy"], e.data["from"]) for e in events_of(store, "exp01", t.POLICY_APPLIED)]
    assert [h for h, _ in applied] == [old.hash, new.hash]
    assert verify_run("exp01", list(store.iter_run("exp01")), {old.hash: old, new.hash: new}.__getitem__).ok


def test_a_second_worker_announcing_the_same_policy_appends_nothing(store, policy_file, worker_ctx):
    store.append([metric("exp01", 1, loss=1.0)])
    process_run("exp01", [])
    other = dataclasses.replace(context.current(), policies=PolicySource(host="worker-2", path=policy_file))
    context.install(other)
    process_run("exp01", [])
    assert len(events_of(store, t.SYSTEM_RUN, t.POLICY_LOADED)) == 1


def test_a_quiet_run_is_ticked_and_waits_when_silent_and_ended_runs_are_not(store, r, worker_ctx):
    clock = FakeClock(1000.0)
    context.install(dataclasses.replace(worker_ctx, clock=clock))
    settle = settler(store, r, clock, queue_name="tw-test")

    store.append([make_event(t.RUN_LAUNCHED, run="exp01", host="gpu1", producer="launch", seq=1, ts=1000.0),
                  metric("exp01", 1, step=1, loss=2.0)])  # fmt: skip
    settle()
    due = r.zscore(store.keys.schedule(), "exp01")
    assert due == 1060.0  # startup phase: a minute after the last job
    ticks = 0
    for minute in range(1, 18):
        clock.now = 1000.0 + minute * 60 + 1
        settle()
        ticks = len(events_of(store, "exp01", t.TICK))
    assert ticks == 17  # one per minute, none more
    opened = [e.data["rule"] for e in events_of(store, "exp01", t.ANOMALY_OPENED)]
    # 15 minutes without a loss; one step only: too few for run-stalled's cadence, and past its first step
    assert opened == ["run-silent"]
    assert [d for d, _, _ in decisions(store)] == [t.CONTINUE, t.WAIT]

    store.append([nan_metric("exp01", 2)])  # the run comes back, broken: STOP, and no more ticks
    settle()
    assert [d for d, _, _ in decisions(store)][-1] == t.STOP
    assert r.zscore(store.keys.schedule(), "exp01") is None
    clock.now += 3600
    settle()
    assert len(events_of(store, "exp01", t.TICK)) == ticks


def test_stop_writes_evidence_with_chart_findings_and_summary(store, worker_ctx, tmp_path):
    store.append([metric("exp01", i, step=i, loss=2.0 / i, lr=3e-4) for i in range(1, 30)])
    store.append([nan_metric("exp01", 30)])
    process_run("exp01", [])
    process_run("exp01", [])  # a repeated job adds nothing
    (built,) = events_of(store, "exp01", t.EVIDENCE_BUILT)
    assert built.data["files"] == ["evidence.json", "report.md", "chart.png"]
    assert built.data["summary"].startswith(
        "FINAL_SUMMARY run=exp01 host=gpu1 decision=STOP rule=loss-nonfinite step=30"
    )
    pack = tmp_path / "evidence" / "exp01"
    (pack_dir,) = pack.iterdir()
    with Image.open(pack_dir / "chart.png") as image:
        image.verify()
    # the chart and report are also in Redis for a while, for a bot on another machine to upload
    kept = packfiles.read(store.redis, store.keys, run="exp01", event_id=built.data["decision"])
    assert kept == {
        "chart.png": (pack_dir / "chart.png").read_bytes(),
        "report.md": (pack_dir / "report.md").read_bytes(),
    }
    assert 0 < store.redis.ttl(store.keys.pack_files("exp01", built.data["decision"])) <= packfiles.TTL_S
    findings = (tmp_path / "findings.md").read_text()
    assert findings.count("exp01 stopped by loss-nonfinite") == 1
    assert f"- Evidence: {pack_dir}" in findings
    assert math.isnan(events_of(store, "exp01", t.METRIC)[-1].data["loss"])


def test_a_one_rule_policy_that_extends_the_default_stops_a_nan_run(store, policy_file, worker_ctx):
    rewrite(policy_file, GN_WAIT.replace("rules:", "extends: default\nrules:"))  # gn-high: the team's one rule
    store.append([metric("exp01", i, step=i, loss=2.0 / i, grad_norm=1.0) for i in range(1, 10)])
    store.append([nan_metric("exp01", 10)])
    process_run("exp01", [])
    policy = PolicySource(host="x", path=policy_file).policy
    assert policy.rule("gn-high") is not None
    assert decisions(store)[-1] == (t.STOP, "loss-nonfinite", policy.hash)
    # recorded with the default it extends: a later worker or replay rebuilds this policy, hash and all
    loaded = events_of(store, t.SYSTEM_RUN, t.POLICY_LOADED)[-1]
    assert (loaded.data["policy"], loaded.data["base"]) == (policy.hash, policy.base_text)
    recorded = last_recorded_policy(store)
    assert recorded is not None and recorded.hash == policy.hash
    assert verify_run("exp01", list(store.iter_run("exp01")), {policy.hash: recorded}.__getitem__).ok


GN_CRITICAL = GN_WAIT.replace("decision: WAIT", "severity: critical")


def test_a_critical_anomalys_chart_is_drawn_outside_the_run_lock_after_the_input_is_evaluated(store, policy_file):
    """The chart is drawn once the run's lock is released; not while the run has input its evaluation has not
    read (a STOP may be in it), nor committed while another job holds the run: it stays pending, and the job
    that evaluates that input draws it afterwards, once."""
    from trainwarden.events.run_lock import RunLock
    from trainwarden.workers.process import RunProcessor, record_policy_events

    rewrite(policy_file, GN_CRITICAL)
    store.append([metric("exp01", i, step=i, loss=2.0 / i, grad_norm=1.0) for i in range(1, 10)])
    store.append([metric("exp01", 10, step=10, loss=0.2, grad_norm=180.0)])
    ctx = context.current()
    record_policy_events(ctx)
    proc = RunProcessor(ctx, "exp01")
    lock = RunLock(ctx.redis, store.keys, "exp01", timeout_s=2.0)
    assert lock.acquire()
    assert proc._evaluate(lock)  # the chart is pending ...
    proc._perform_pending(lock)  # ... and not drawn under the lock
    lock.release()
    store.append([metric("exp01", 11, step=11, loss=0.2, grad_norm=1.0)])  # arrives before it is drawn
    proc._draw_charts(lock)
    assert events_of(store, "exp01", t.ANOMALY_CHARTED) == []
    other = RunLock(ctx.redis, store.keys, "exp01", timeout_s=2.0)  # a job evaluating step 11 holds the run
    assert other.acquire()
    assert proc._evaluate(other)
    proc._draw_charts(lock)
    other.release()
    assert events_of(store, "exp01", t.ANOMALY_CHARTED) == []
    process_run("exp01", [])  # that job, done evaluating, draws it
    (opened,) = events_of(store, "exp01", t.ANOMALY_OPENED)
    (charted,) = events_of(store, "exp01", t.ANOMALY_CHARTED)
    assert charted.data["anomaly"] == opened.id
    assert packfiles.read(store.redis, store.keys, run="exp01", event_id=opened.id)["chart.png"].startswith(b"\x89PNG")
    process_run("exp01", [])
    assert len(events_of(store, "exp01", t.ANOMALY_CHARTED)) == 1

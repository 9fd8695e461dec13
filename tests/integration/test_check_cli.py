"""`trainwarden check RUN` prints the training-check method's report exactly (tests/report_format.py): local
time with its zone, the method's three data sources, its eight fields in order with Evidence as a field, an
ended run said as ended (a stopped one with its FINAL_SUMMARY), missing data a WAIT. Real Redis, the real
worker's decisions, the CLI as a user runs it."""

import math
import os
import re
import subprocess
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.workers.process import process_run

from tests.conftest import REPO, cli_argv
from tests.helpers import events_of
from tests.report_format import skill_fields

pytestmark = [pytest.mark.redis, pytest.mark.tmux]

ZONE = "Europe/Berlin"  # December: CET
WANDB_URL = "https://wandb.ai/lab/proj/runs/abc123"


def cli(settings, *args):
    return subprocess.run(cli_argv(settings, *args), capture_output=True, text=True, cwd=REPO, check=False,
                          timeout=60, env={**os.environ, "TZ": ZONE})  # fmt: skip


def berlin(ts: float) -> str:
    return datetime.fromtimestamp(ts, ZoneInfo(ZONE)).strftime("%Y-%m-%d %H:%M %Z")


class Run:
    """A run's events as the launch, the agent and the worker record them (ts relative to now)."""

    def __init__(self, store, name, *, log_path, wandb_url=None):
        self.store, self.name, self.seq, self.t0 = store, name, 0, time.time() - 120
        self.add(t.RUN_LAUNCHED, 0, session=f"train-{name}", host="gpu1", log_path=str(log_path),
                 **({"wandb_url": wandb_url} if wandb_url else {}))  # fmt: skip

    def add(self, type_, at, **data):
        self.seq += 1
        self.store.append([make_event(type_, run=self.name, host="gpu1", producer=f"gpu1/agent/{self.name}",
                                      seq=self.seq, ts=self.t0 + at, data=data)])  # fmt: skip

    def source(self, status, at=1):
        self.add(t.SOURCE_STATUS, at, source="metrics", status=status, reason=f"test: {status}")

    def metrics(self, steps, at=2, **extra):
        for i, step in enumerate(steps):
            self.add(t.METRIC, at + i, step=step, loss=3.0 / step + 1, lr=0.0003, **extra)
        process_run(self.name, [])  # the worker decides, as on every event


def training_log(tmp_path, name, lines=40):
    log = tmp_path / f"{name}.log"
    log.write_text("".join(f"step={i * 10} loss={3.0 / i + 1:.4f} lr=0.0003\n" for i in range(1, lines + 1)))
    return log


def check(settings_file, run, *args):
    out = cli(settings_file, "check", run, *args)
    assert out.returncode == 0, out.stderr
    return out.stdout, skill_fields(out.stdout)


def test_a_running_run_reads_as_the_methods_report(store, settings_file, worker_ctx, tmp_path):
    log = training_log(tmp_path, "exp21")
    run = Run(store, "exp21", log_path=log)
    run.source("log")
    run.metrics(range(10, 60, 10))
    before = time.time()
    report, f = check(settings_file, "exp21")
    assert f["time"] in {berlin(before), berlin(before + 60)} and f["time"].endswith(" CET")
    assert f["source"] == "log_fallback"
    assert f["extra:Source"] == "log (the run's log; the run does not use W&B)"  # the actual source, below
    assert f["run"] == "exp21 on gpu1 (running, step 50)"
    assert f["metrics"] == "loss 1.06 (from 1.3 over 5 samples), lr 0.0003"
    assert f["anomalies"] == "none open"
    assert re.fullmatch(rf"log {re.escape(str(log))} lines 31-40; event log of exp21 \(\d+ events\)", f["evidence"])
    assert (f["decision"], f["reason"]) == ("CONTINUE", "healthy")
    assert f["next"] in {berlin(before + 1800), berlin(before + 1860)}  # 30 minutes later, local time
    assert "step=400 loss=1.0750" in report.split("### Last log lines")[1]  # the lines cited
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d CET", f["time"])  # not `2026-12-06T13:03:01.123456+00:00`
    _, f = check(settings_file, "exp21", "--interval", "10m")
    assert f["next"] in {berlin(before + 600), berlin(before + 660)}
    bad = cli(settings_file, "check", "exp21", "--interval", "soon")
    assert bad.returncode != 0 and "--interval: 'soon' is not a duration" in bad.stderr


def test_a_finished_run_is_said_as_ended(store, settings_file, worker_ctx, tmp_path):
    run = Run(store, "exp22", log_path=training_log(tmp_path, "exp22"), wandb_url=WANDB_URL)
    run.source("wandb_ok")
    run.metrics(range(100, 400, 100))
    run.add(t.RUN_FINISHED, 30, exit_code=0)
    _, f = check(settings_file, "exp22")
    assert f["source"] == "wandb_ok" and f["run"] == "exp22 on gpu1 (finished, step 300)"
    assert f["decision"] == "none (run ended: finished)"  # not CONTINUE
    assert f["reason"] == "finished at step 300 (exit 0)"  # not "healthy"
    assert f["next"] == "none (run ended)"
    assert f["extra:Recorded decision"] == "CONTINUE (healthy)"  # what the worker last said, kept below
    assert f"W&B {WANDB_URL}" in f["evidence"]

    failed = Run(store, "exp26", log_path=training_log(tmp_path, "exp26"))
    failed.source("log")
    failed.metrics([10, 20])
    failed.add(t.RUN_FAILED, 30, exit_code=3)
    _, f = check(settings_file, "exp26")
    assert (f["decision"], f["reason"]) == ("none (run ended: failed)", "failed at step 20 (exit 3)")
    assert f["next"] == "none (run ended)"


def test_a_stopped_run_ends_with_its_final_summary(store, settings_file, worker_ctx, tmp_path):
    log = training_log(tmp_path, "exp23")
    with log.open("a") as f:
        f.write("step=410 loss=nan lr=0.0003\n")
    run = Run(store, "exp23", log_path=log)
    run.source("log")
    run.metrics(range(10, 50, 10))
    run.add(t.METRIC, 20, step=410, loss=math.nan)
    process_run("exp23", [])
    (built,) = events_of(store, "exp23", t.EVIDENCE_BUILT)
    run.add(t.STOP_DONE, 40, detail="killed tmux session train-exp23")
    report, f = check(settings_file, "exp23")
    assert f["run"] == "exp23 on gpu1 (stopped, step 410)"
    assert (f["decision"], f["next"]) == ("STOP", "none (run ended)")
    assert f["reason"].startswith("loss=nan") and f["extra:Rule"] == "loss-nonfinite (critical)"
    assert f["anomalies"].startswith("loss-nonfinite: loss=nan")
    pack = built.data["path"]
    assert f["evidence"].startswith(f"values loss=nan, step=410; log {log} lines 32-41; evidence pack {pack}")
    summary = next(line for line in report.splitlines() if line.startswith("FINAL_SUMMARY "))
    assert summary.startswith("FINAL_SUMMARY run=exp23 host=gpu1 decision=STOP rule=loss-nonfinite step=410 ")
    assert summary.endswith(f"evidence={pack}")
    assert report.index(summary) > report.index("- Rule: ")  # below the method's lines and the extra fields
    # the STOP's evidence pack holds the same report format (workers/report.py serves both)
    packed = skill_fields(Path(pack, "report.md").read_text())
    assert (packed["source"], packed["decision"]) == ("log_fallback", "STOP")
    assert packed["evidence"].startswith(f"values loss=nan, step=410; log {log} lines ")

    # stopped by hand (`trainwarden stop`, /stop): no pack, the stop's own reason
    by_hand = Run(store, "exp27", log_path=training_log(tmp_path, "exp27"))
    by_hand.source("log")
    by_hand.metrics([10, 20])
    by_hand.add(t.STOP_REQUESTED, 30, by="cli", user="me", reason="lr too high")
    by_hand.add(t.STOP_DONE, 31, detail="sent Ctrl-C")
    report, f = check(settings_file, "exp27")
    assert (f["decision"], f["reason"], f["extra:Rule"]) == ("STOP", "lr too high", "manual")
    assert "\nFINAL_SUMMARY run=exp27 host=gpu1 decision=STOP rule=manual step=20 reason='lr too high' " in report


def test_a_run_with_no_readable_source_is_a_wait_never_a_stop(store, settings_file, worker_ctx, tmp_path):
    missing = tmp_path / "nowhere" / "train.log"
    run = Run(store, "exp24", log_path=missing)
    run.source("unreachable")
    process_run("exp24", [])
    _, f = check(settings_file, "exp24")
    assert (f["source"], f["decision"]) == ("unreachable", "WAIT")
    assert f["reason"].startswith("no data to judge the run by (unreachable (the agent can read neither W&B")
    assert f["metrics"] == "no metrics yet" and f"; log {missing} (not readable from here); " in f["evidence"]
    assert f["next"].endswith(" CET")  # checked again later

    # W&B read once, then silent for 10 minutes while the run goes on: stale, so unreachable, a WAIT
    stale = Run(store, "exp25", log_path=missing, wandb_url=WANDB_URL)
    stale.t0 -= 600
    stale.source("wandb_ok")
    stale.metrics([10, 20])
    _, f = check(settings_file, "exp25")
    assert (f["source"], f["decision"]) == ("unreachable", "WAIT")
    assert re.search(r"wandb_ok \(W&B history rows\), but its last row is 1[12]m(\d+s)? old \(stale after 1m\)",
                     f["reason"]), f["reason"]  # fmt: skip
    assert f["extra:Recorded decision"] == "CONTINUE (healthy)"


def test_launch_no_wandb_then_check_before_any_decision(store, settings_file, tmp_path, tmux_socket):
    launched = cli(settings_file, "launch", "--no-wandb", "--workdir", str(tmp_path), "--tmux-socket", tmux_socket,
                   "exp09", "--", "bash", "-c", "echo hello from exp09; sleep 30")  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    (event,) = events_of(store, "exp09", t.RUN_LAUNCHED)
    assert event.data["uses_wandb"] is False
    ((_, fields),) = store.redis.xrange(store.keys.agent_control(event.data["host"]))
    assert fields[b"wandb"] == b"0"  # the agent neither reads nor expects W&B for it

    report, f = check(settings_file, "exp09")
    assert f["run"] == "exp09 on testhost (launched, before the first step)" and f["extra:Rule"] == "none fired"
    assert f["extra:Remedy"] == "nothing to do" and f["extra:Recorded decision"] == "none"
    # no agent has said anything yet: nothing read, so a WAIT
    assert (f["source"], f["decision"]) == ("unreachable", "WAIT")
    assert f["extra:Source"] == "not announced by the agent yet, and nothing read from the run"
    assert "None" not in report and " at 0x" not in report, report
    # the log's own last lines, read from here (the launch waited for them), cited by line
    assert "hello from exp09" in report.split("### Last log lines")[1], report
    assert f"log {event.data['log_path']} line 1;" in f["evidence"]

    unknown = cli(settings_file, "check", "exp404")
    assert unknown.returncode == 1 and "unknown run 'exp404'" in unknown.stderr

"""The vertical slice with real processes: training in tmux -> agent -> dispatcher -> RQ worker -> stop."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from trainwarden.events import catalogue
from trainwarden.events import types as t
from trainwarden.remote.local_launch import LaunchSpec, launch_local
from trainwarden.remote.stop import LocalTmuxController, StopTarget

from tests.conftest import REPO, cli_argv, watch_until_stopped
from tests.helpers import events_of
from tests.report_format import skill_fields

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.slow]

SECRET = "0123456789abcdef0123456789abcdef01234567"


def test_nan_in_a_live_run_is_stopped_with_evidence(store, tmp_path, tmux_socket, settings_file):
    log = tmp_path / "train.log"
    spec = LaunchSpec(
        run="exp01",
        command=(sys.executable, "-m", "trainwarden.tools.demo_train", "--nan-at", "8", "--interval", "0.2"),
        workdir=REPO,
        log_path=log,
        tmux_socket=tmux_socket,
        env={"WANDB_API_KEY": SECRET},
        config={"lr": 3e-4, "wandb_api_key": SECRET},
    )
    launched = launch_local(spec, store=store, host="testhost")
    watch_until_stopped(settings_file, store, tmp_path, "exp01", log)

    events = events_of(store, "exp01")
    types = [e.type for e in events]
    stops = [e for e in events if e.type == t.DECISION and e.data["decision"] == t.STOP]
    assert len(stops) == 1
    stop = stops[0]
    assert stop.data["rule"] == "loss-nonfinite"
    assert stop.data["reason"] == "loss=nan at step 8"
    order = [types.index(x) for x in (t.ANOMALY_OPENED, t.STOP_REQUESTED, t.EVIDENCE_BUILT, t.STOP_DONE)]
    assert order == sorted(order)
    assert types.count(t.STOP_DONE) == 1

    (built,) = events_of(store, "exp01", t.EVIDENCE_BUILT)
    pack = json.loads((tmp_path / "evidence" / built.data["path"].split("/evidence/")[1] / "evidence.json").read_text())
    assert pack["run"] == "exp01"
    assert pack["rule"] == "loss-nonfinite"
    assert pack["offending_values"] == {"loss": "nan", "step": 8}
    assert any("step=8 loss=nan" in line for line in pack["log_tail"])
    assert pack["config"]["session"] == "train-exp01"
    assert pack["files_inspected"] == [str(log)]
    report = (tmp_path / "evidence" / built.data["path"].split("/evidence/")[1] / "report.md").read_text()
    fields = skill_fields(report)  # the training-check method's report, as `check` prints it
    assert (fields["decision"], fields["reason"]) == ("STOP", "loss=nan at step 8")
    assert re.search(rf"; log {re.escape(str(log))} lines? \d+(-\d+)?; ", fields["evidence"]), report

    assert not LocalTmuxController().is_running(StopTarget.from_launch("exp01", launched.data, default_host="x"))
    everything = json.dumps([e.data for e in events]) + json.dumps(pack) + report
    assert SECRET not in everything
    # every event the agent, the launcher and the worker wrote has the payload docs/events.md gives its type
    assert [p for e in events for p in catalogue.problems(e.type, e.data)] == []


def test_demo_command_passes(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "trainwarden", "demo", "--nan-at", "6"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "ANOMALY demo-nan@" in out
    assert "wandb" not in out  # the synthetic run does not use W&B: no W&B rule applies to it
    assert "STOP demo-nan@" in out and "loss=nan at step 6 (loss-nonfinite)" in out
    assert "report.md" in out and "chart.png" in out
    # the pack outlives the demo's temporary directory, in the directory the demo ran in
    (kept,) = (tmp_path / "trainwarden-demo-evidence" / "demo-nan").iterdir()
    assert f"evidence pack: {kept}" in out and (kept / "report.md").exists() and (kept / "chart.png").exists()
    # and every line that names it names that copy: Slack's EVIDENCE and STOPPED lines, the FINAL_SUMMARY
    lines = {"EVIDENCE": r"\] EVIDENCE demo-nan@.*Pack: (\S+)", "STOPPED": r"\] STOPPED demo-nan@.*Evidence: (\S+)",
             "FINAL_SUMMARY": r"FINAL_SUMMARY run=demo-nan .* evidence=(\S+)"}  # fmt: skip
    named = {word: re.search(pattern, out) for word, pattern in lines.items()}
    assert {word: m and Path(m[1]) for word, m in named.items()} == dict.fromkeys(named, kept), out
    assert "removed /" in out  # the demo's own directory is gone: the paths above are not in it
    assert "FINAL_SUMMARY run=demo-nan host=" in out and " step=6 reason='loss=nan at step 6'" in out
    assert "None" not in out, out
    assert "tmux session:  train-demo-nan gone" in out
    assert "demo passed" in out


def test_demo_that_cannot_keep_the_pack_here_keeps_its_directory(tmp_path):
    """./trainwarden-demo-evidence cannot be written (here: a file of that name): the pack is written in the
    demo's own directory, which is then kept, so the paths printed still exist."""
    (tmp_path / "trainwarden-demo-evidence").write_text("not a directory")
    proc = subprocess.run([sys.executable, "-m", "trainwarden", "demo", "--nan-at", "4"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, check=False)  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "./trainwarden-demo-evidence exists and is not a directory: the evidence pack goes to" in out
    kept = re.search(r"\] STOPPED demo-nan@.*Evidence: (\S+)", out)
    assert kept and (Path(kept[1]) / "report.md").exists(), out
    workdir = re.search(r"==> kept (\S+)", out)
    assert workdir and Path(kept[1]).is_relative_to(workdir[1])
    shutil.rmtree(workdir[1])


def test_replay_cli_prints_timeline_and_final_state(store, settings_file, worker_ctx):
    from trainwarden.workers.process import process_run

    from tests.helpers import metric, nan_metric

    store.append([metric("exp01", 1, step=1, loss=2.0), nan_metric("exp01", 2)])
    store.redis.xadd(store.keys.log("exp01"), {"e": b"garbage"})
    process_run("exp01", [])
    out = subprocess.run(cli_argv(settings_file, "replay", "exp01"), capture_output=True, text=True, check=True,
                         cwd=REPO).stdout  # fmt: skip
    assert "Timeline of exp01" in out
    assert "step=1 loss=2" in out
    assert "!! undecodable" in out
    assert "STOP by loss-nonfinite: loss=nan at step 2" in out
    assert "status:     stopping" in out or "status:     stopped" in out
    assert "decision:   STOP" in out

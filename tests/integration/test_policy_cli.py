"""Policy, check, replay and backtest commands against a real Redis, as a user runs them."""

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.workers import context
from trainwarden.workers.process import process_run

from tests.conftest import REPO, cli_argv
from tests.helpers import events_of, metric, nan_metric
from tests.report_format import skill_fields
from tests.unit.test_schemas import validate
from tests.wandb_runs import write_offline_run

pytestmark = pytest.mark.redis

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "policies"


def cli(settings, *args):
    return subprocess.run(cli_argv(settings, *args), capture_output=True, text=True, cwd=REPO, check=False,
                          timeout=60)  # fmt: skip


def test_policy_check_exit_codes_and_messages(settings_file):
    good = cli(settings_file, "policy", "check", str(REPO / "policies" / "default.yaml"))
    assert good.returncode == 0, good.stderr
    count = len(yaml.safe_load((REPO / "policies" / "default.yaml").read_text())["rules"])
    assert f"ok: policy 'default', {count} rules, hash" in good.stdout
    bad = cli(settings_file, "policy", "check", str(FIXTURES / "bad-duration.yaml"), str(FIXTURES / "bad-regex.yaml"))
    assert bad.returncode == 1
    assert f"{FIXTURES / 'bad-duration.yaml'}:5:15: 'duration' must be a duration like 30s" in bad.stderr
    assert f"{FIXTURES / 'bad-regex.yaml'}:5:14: 'pattern' is not a valid regular expression" in bad.stderr


ONE_RULE = "name: mine\nrules:\n  - {id: gn-high, kind: threshold, metric: grad_norm, above: 100, decision: STOP}\n"


def test_policy_check_warns_in_one_line_when_a_stopping_policy_has_no_nonfinite_loss_rule(settings_file, tmp_path):
    mine, extended = tmp_path / "mine.yaml", tmp_path / "extended.yaml"
    mine.write_text(ONE_RULE)
    extended.write_text(ONE_RULE.replace("rules:", "extends: default\nrules:"))
    out = cli(settings_file, "policy", "check", str(mine), str(extended), str(REPO / "policies" / "default.yaml"))
    assert out.returncode == 0, out.stderr  # a warning, not a failure
    count = len(yaml.safe_load((REPO / "policies" / "default.yaml").read_text())["rules"])
    assert [line.split(": ", 1)[0] for line in out.stdout.splitlines()] == [
        str(mine),
        str(mine),
        str(extended),
        str(REPO / "policies" / "default.yaml"),
    ]
    assert out.stdout.splitlines()[1] == (
        f"{mine}: warning: policy 'mine' stops runs (rule 'gn-high') but has no rule for a non-finite loss, so a NaN "
        "run is never stopped: add `extends: default` or a `kind: nonfinite` rule on loss"
    )
    assert f"{extended}: ok: policy 'mine', {count + 1} rules, hash" in out.stdout


def test_policy_show_prints_a_file_that_checks(settings_file, tmp_path):
    shown = cli(settings_file, "policy", "show")
    copy = tmp_path / "mine.yaml"
    copy.write_text(shown.stdout)
    assert cli(settings_file, "policy", "check", str(copy)).returncode == 0


def recorded_run(store):
    """A run with a launch, 39 healthy metrics (ts 1001..1039), an OOM line, then NaN; jobs at ts 1040 and 1300."""
    store.append([make_event(t.RUN_LAUNCHED, run="exp01", host="gpu1", producer="launch", seq=1, ts=1000.0,
                             data={"session": "train-exp01", "host": "gpu1"})])  # fmt: skip
    store.append([metric("exp01", i, step=i * 10, loss=3.0 / i + 1) for i in range(1, 40)])
    store.append([make_event(t.LOG_LINE, run="exp01", host="gpu1", producer="gpu1/log/exp01/g0", seq=100,
                             ts=1100.0, data={"tag": "oom", "line": "CUDA out of memory"})])  # fmt: skip
    ctx = context.current()
    context.install(dataclasses.replace(ctx, clock=lambda: 1040.0))
    process_run("exp01", [])
    store.append([nan_metric("exp01", 200), *(nan_metric("exp01", 200 + i) for i in (1, 2))])
    context.install(dataclasses.replace(ctx, clock=lambda: 1300.0))
    process_run("exp01", [])


def test_replay_verify_confirms_the_log_and_catches_a_decision_the_policy_would_not_make(
    store, settings_file, worker_ctx
):
    recorded_run(store)
    ok = cli(settings_file, "replay", "exp01", "--verify")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "OK: every decision and anomaly matches the log" in ok.stdout
    assert "(2 decisions)" in ok.stdout
    forged = make_event(t.DECISION, run="exp01", host="w", producer="eval/exp01", seq=99, ts=2000.0,
                        data={"decision": "STOP", "rule": "grad-norm-high", "reason": "forged"})  # fmt: skip
    store.append([forged])
    bad = cli(settings_file, "replay", "exp01", "--verify")
    assert bad.returncode == 1
    assert "1 outputs differ" in bad.stdout
    assert "recorded decision eval/exp01:99 STOP (forged); re-evaluated nothing" in bad.stdout


def test_replay_filters_and_state_as_of(store, settings_file, worker_ctx):
    recorded_run(store)
    anomalies = cli(settings_file, "replay", "exp01", "--type", "anomaly").stdout
    lines = [line for line in anomalies.splitlines() if line.startswith("  ") and "anomaly." in line]
    assert len(lines) == 3 and all("anomaly.opened" in line or "anomaly.resolved" in line for line in lines)
    assert "metric " not in anomalies.split("Final state")[0]
    window = cli(settings_file, "replay", "exp01", "--type", "metric", "--since", "1005", "--until", "1009.5").stdout
    assert "(5 of " in window  # metrics at ts 1005..1009
    before_nan = cli(settings_file, "replay", "exp01", "--as-of", "1045").stdout
    assert "State as of" in before_nan
    assert "decision:   CONTINUE" in before_nan
    bad = cli(settings_file, "replay", "exp01", "--since", "yesterday")
    assert bad.returncode == 1 and "--since 'yesterday': expected an ISO time" in bad.stderr


def test_check_prints_the_training_check_report(store, settings_file, worker_ctx):
    recorded_run(store)
    out = cli(settings_file, "check", "exp01")
    assert out.returncode == 0, out.stderr
    report = out.stdout
    f = skill_fields(report)
    # no source.status in this log, but metrics were read: from the log (the agent announces nothing before it
    # can tell whether the run uses W&B), said as the method's log_fallback with the actual source below
    assert (f["source"], f["extra:Source"].split(";")[0]) == ("log_fallback", "not announced by the agent")
    assert f["run"] == "exp01 on gpu1 (stopped, step 202)"
    assert (f["decision"], f["next"]) == ("STOP", "none (run ended)") and f["reason"].startswith("loss=nan")
    assert "None" not in report and f["evidence"].startswith("values loss=nan, step=200; evidence pack "), report
    assert "\nFINAL_SUMMARY run=exp01 host=gpu1 decision=STOP rule=loss-nonfinite step=200 " in report
    assert "CUDA out of memory" in report.split("### Last log lines")[1]


def test_backtest_a_recorded_run_and_a_log_file(store, settings_file, worker_ctx, tmp_path):
    recorded_run(store)
    out = cli(settings_file, "policy", "backtest", "default", "--run", "exp01")
    assert out.returncode == 0, out.stderr
    assert "Rules that would have fired:" in out.stdout
    assert "log-oom (critical): CUDA out of memory" in out.stdout
    assert "STOP      loss-nonfinite: loss=nan at step 200" in out.stdout
    log = tmp_path / "train.log"
    log.write_text("".join(f"step={i * 10} loss={3.0 / i + 1:.4f}\n" for i in range(1, 50))
                   + "".join(f"step={i * 10} loss=nan\n" for i in range(50, 80)))  # fmt: skip
    out = cli(settings_file, "policy", "backtest", "default", "--log", str(log), "--interval", "60", "--gpus", "8")
    assert out.returncode == 0, out.stderr
    assert ("Would have stopped at step 500 by loss-nonfinite: 290 steps and 29m before the run's end "
            "(3.87 GPU-hours saved at 8 GPUs).") in out.stdout  # fmt: skip
    not_a_run = cli(settings_file, "policy", "backtest", "default", "--wandb-dir", str(tmp_path))
    assert not_a_run.returncode == 1
    assert f"--wandb-dir {tmp_path}: no run-*.wandb file" in not_a_run.stderr


def test_backtest_a_w_and_b_run_directory(settings_file, tmp_path):
    """Run files written by the real wandb library (offline, inside the test)."""
    rows = [{"loss": 3.0 / i + 1} for i in range(1, 40)] + [{"loss": "nan"} for _ in range(10)]
    run_dir = write_offline_run(tmp_path / "wb", rows)
    out = cli(settings_file, "policy", "backtest", "default", "--wandb-dir", str(run_dir), "--interval", "60")
    assert out.returncode == 0, out.stderr
    assert "STOP      loss-nonfinite: loss=nan at step 39" in out.stdout


def test_the_launcher_refuses_the_reserved_system_run(settings_file, tmp_path):
    out = cli(settings_file, "launch", t.SYSTEM_RUN, "--workdir", str(tmp_path), "--", "true")
    assert out.returncode == 1
    assert "reserved" in out.stderr


def test_backtest_of_an_unknown_run(store, settings_file):
    out = cli(settings_file, "policy", "backtest", "default", "--run", "ghost")
    assert out.returncode == 1
    assert "unknown run 'ghost'" in out.stderr
    assert events_of(store, "ghost") == []


def test_backtest_json_of_a_recorded_run_and_a_w_and_b_directory(store, settings_file, worker_ctx, tmp_path):
    """--json on every source prints the document `trainwarden schema backtest` describes."""
    recorded_run(store)
    out = cli(settings_file, "policy", "backtest", "default", "--run", "exp01", "--json")
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert validate(document, "backtest") == []
    assert document["stop"]["rule"] == "loss-nonfinite" and document["stop"]["step"] == 200
    assert {"log-oom", "loss-nonfinite"} <= {m["rule"] for m in document["firings"]}
    run_dir = write_offline_run(tmp_path / "wb", [{"loss": 3.0 / i + 1} for i in range(1, 40)] + [{"loss": "nan"}])
    out = cli(settings_file, "policy", "backtest", "default", "--wandb-dir", str(run_dir), "--json")
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert validate(document, "backtest") == [] and document["metrics"] == 40 and document["stop"]["step"] == 39

"""Shadow mode with real processes: training in tmux -> agent -> dispatcher -> RQ worker -> Slack bot.

A rule in shadow mode fires on a NaN loss: the bot posts "would have stopped" in the run's thread, the
run keeps training (its tmux session is alive, no stop was ever requested), and `trainwarden policy report`
counts the would-have-stopped decision.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.redis_types import hash_fields
from trainwarden.events.sids import sid_key
from trainwarden.events.store import EventStore
from trainwarden.remote.local_launch import LaunchSpec, launch_local
from trainwarden.remote.stop import LocalTmuxController, StopTarget
from trainwarden.workers.checkpoint import decode_checkpoint

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for
from tests.slack_api import SlackAPI
from trainwarden.cli.policy_report import build_report, report_lines
from trainwarden.tools.redis_server import free_port

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.slow]

POLICY = """\
name: shadow-trial
rules:
  - id: grad-norm-nonfinite
    kind: nonfinite
    metric: grad_norm
    severity: critical
  - id: loss-nonfinite
    kind: nonfinite
    metric: loss
    decision: STOP
    severity: critical
    shadow: true          # on trial: say what it would do, do nothing
    remedy: lower the learning rate
"""


def _metric_sids(store: EventStore, *, before: str | None = None) -> list[str]:
    """Stream ids of exp01's metric events (those before the event `before` only, when given)."""
    out = []
    for sid, e in store.iter_run("exp01"):
        if isinstance(e, Event) and e.id == before:
            break
        if isinstance(e, Event) and e.type == t.METRIC:
            out.append(sid)
    return out


def _evaluated(store: EventStore) -> str:
    """The stream id up to which the workers evaluated exp01."""
    cp = decode_checkpoint(hash_fields(store.redis.hgetall(store.keys.cursor("exp01"))))
    return cp.after or "0-0"


def test_a_shadow_rule_posts_would_have_stopped_and_stops_nothing(
    store: EventStore, tmp_path: Path, tmux_socket: str, settings_file: Path, slack_api: SlackAPI
) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    settings = yaml.safe_load(settings_file.read_text())
    settings["policy"] = str(tmp_path / "policy.yaml")
    settings["agent"]["nvml"] = False
    settings["slack"] = {"channel": "C1", "rate_per_s": 1000, "burst": 1000, "http_host": "127.0.0.1",
                         "http_port": free_port()}  # fmt: skip
    settings_file.write_text(yaml.safe_dump(settings))
    log = tmp_path / "train.log"
    spec = LaunchSpec(
        run="exp01",
        command=(sys.executable, "-m", "trainwarden.tools.demo_train", "--nan-at", "6", "--interval", "0.1"),
        workdir=REPO, log_path=log, tmux_socket=tmux_socket,
    )  # fmt: skip
    launched = launch_local(spec, store=store, host="testhost")
    bot_env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_API_URL": slack_api.url, "SLACK_SIGNING_SECRET": "s3cret"}
    names = ("agent", "dispatcher", "worker", "bot")
    procs = [
        spawn(settings_file, tmp_path / "agent.log", "agent", "--watch", f"exp01={log}"),
        spawn(settings_file, tmp_path / "dispatcher.log", "dispatcher"),
        spawn(settings_file, tmp_path / "worker.log", "worker"),
        spawn(settings_file, tmp_path / "bot.log", "bot", env=bot_env),
    ]
    try:
        would = wait_for(lambda: [m for m in slack_api.messages if "WOULD HAVE STOPPED exp01" in m.text],
                         timeout=45, what="the would-have-stopped message")  # fmt: skip
        (shadow,) = events_of(store, "exp01", t.DECISION_SHADOW)
        # more metric lines after the shadow decision, evaluated by the worker: still nothing asked to stop the run
        later = wait_for(lambda: _metric_sids(store)[len(_metric_sids(store, before=shadow.id)) + 5 :],
                         timeout=20, what="training goes on")  # fmt: skip
        wait_for(lambda: sid_key(_evaluated(store)) >= sid_key(later[0]), timeout=20, what="the worker evaluated them")
    finally:
        for p in procs:
            stop_process(p)
        for name in names:  # shown by pytest only when the test fails
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])

    assert shadow.data["decision"] == t.STOP and shadow.data["rule"] == "loss-nonfinite"
    assert shadow.data["reason"].startswith("loss=nan at step 6")
    types = [e.type for e in events_of(store, "exp01")]
    assert t.STOP_REQUESTED not in types and t.STOP_DONE not in types and t.EVIDENCE_BUILT not in types
    assert not [e for e in events_of(store, "exp01", t.DECISION) if e.data["decision"] == t.STOP]
    target = StopTarget.from_launch("exp01", launched.data, default_host="x")
    assert LocalTmuxController().is_running(target)  # the training still runs

    # posted in the run's thread: the real (enforced) anomaly is its parent, the shadow decision a reply
    (parent,) = [m for m in slack_api.parents() if "exp01" in m.text]
    assert "grad-norm-nonfinite" in parent.text
    assert [m.thread_ts for m in would] == [parent.ts]
    assert "nothing was stopped" in would[0].text and "shadow" in would[0].text
    assert not [m for m in slack_api.messages if "loss-nonfinite" in m.text and "WOULD HAVE" not in m.text]

    report = subprocess.run(cli_argv(settings_file, "policy", "report", "--since", "1h", "--json"),
                            capture_output=True, text=True, cwd=REPO, timeout=60, check=True).stdout  # fmt: skip
    rules = {r["rule"]: r for r in json.loads(report)["rules"]}
    assert rules["loss-nonfinite"] == {"rule": "loss-nonfinite", "policy": "shadow-trial", "stop": 0, "wait": 0,
                                       "shadow_stop": 1, "shadow_wait": 0, "runs": ["exp01"]}  # fmt: skip
    table = subprocess.run(cli_argv(settings_file, "policy", "report", "--policy", "shadow-trial"),
                           capture_output=True, text=True, cwd=REPO, timeout=60, check=True).stdout  # fmt: skip
    assert "loss-nonfinite" in table and "WOULD-STOP" in table


def _decided(run: str, seq: int, typ: str, decision: str, rule: str | None, policy: str, ts: float) -> Event:
    data = {"decision": decision, "rule": rule, "reason": "r", "trigger": "x", "policy": policy}
    return make_event(typ, run=run, host="w", producer=f"eval/{run}", seq=seq, data=data, ts=ts)


def test_the_policy_report_counts_per_rule_over_the_period_and_by_policy(store: EventStore) -> None:
    from trainwarden.events.envelope import make_event

    now = time.time()
    applied = {"policy": "h-team", "name": "team", "previous": None}
    store.append([make_event(t.POLICY_APPLIED, run="a", host="w", producer="eval/a", seq=1, data=applied, ts=now),
                  _decided("a", 2, t.DECISION_SHADOW, t.STOP, "val-rising", "h-team", now),
                  _decided("a", 3, t.DECISION, t.STOP, "loss-nonfinite", "h-team", now)])  # fmt: skip
    store.append([make_event(t.POLICY_APPLIED, run="b", host="w", producer="eval/b", seq=1, data=applied, ts=now),
                  _decided("b", 2, t.DECISION_SHADOW, t.STOP, "val-rising", "h-team", now),
                  _decided("b", 3, t.DECISION_SHADOW, t.WAIT, "run-silent", "h-other", now),
                  _decided("b", 4, t.DECISION, t.CONTINUE, None, "h-team", now)])  # fmt: skip
    report = build_report(store, since=now - 60, until=now + 1)
    got = {(r.rule, r.policy): (r.stop, r.wait, r.shadow_stop, r.shadow_wait, r.runs) for r in report.rules}
    assert got == {("val-rising", "team"): (0, 0, 2, 0, ["a", "b"]), ("loss-nonfinite", "team"): (1, 0, 0, 0, ["a"]),
                   ("run-silent", "?"): (0, 0, 0, 1, ["b"])}  # fmt: skip
    assert [r.rule for r in build_report(store, since=now - 60, until=now, policy="team").rules] == [
        "val-rising", "loss-nonfinite"]  # fmt: skip
    assert build_report(store, since=now + 30, until=now + 60).rules == []  # outside the period
    lines = report_lines(report)
    assert lines[1].split() == ["RULE", "POLICY", "STOP", "WAIT", "WOULD-STOP", "WOULD-WAIT", "RUNS"]
    assert lines[2].split() == ["val-rising", "team", "0", "0", "2", "0", "2"]

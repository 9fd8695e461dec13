"""`trainwarden runs` against a real Redis: each run's status from the run view, the system run hidden."""

from __future__ import annotations

import subprocess

import pytest
from trainwarden.events import run_view
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.projection import fold
from trainwarden.ops.runs import rows

from tests.conftest import REPO, cli_argv
from tests.helpers import events_of, metric

pytestmark = pytest.mark.redis


def event(event_type: str, run: str, seq: int, **data):
    return make_event(event_type, run=run, host="gpu1", producer="test", seq=seq, data={"host": "gpu1", **data},
                      ts=2000.0 + seq)  # fmt: skip


def history(store):
    """One run in each status, a plan, and an event of trainwarden's own."""
    store.append([event(t.RUN_LAUNCHED, "launched-only", 1, session="train-launched-only")])
    store.append([event(t.RUN_LAUNCHED, "going", 1), metric("going", 2, step=2, loss=1.0)])
    store.append([event(t.RUN_LAUNCHED, "asked", 1), metric("asked", 2, step=2, loss=1.0),
                  event(t.STOP_REQUESTED, "asked", 3, by="cli", reason="r")])  # fmt: skip
    store.append([event(t.RUN_LAUNCHED, "halted", 1), event(t.STOP_REQUESTED, "halted", 2, by="cli", reason="r"),
                  event(t.STOP_DONE, "halted", 3, method="ctrl-c")])  # fmt: skip
    store.append([event(t.RUN_LAUNCHED, "done", 1), event(t.RUN_FINISHED, "done", 2, exit_code=0)])
    store.append([event(t.RUN_LAUNCHED, "crashed", 1), event(t.RUN_FAILED, "crashed", 2, exit_code=3)])
    store.append([event(t.PLAN_STARTED, "plan-stage5", 1, plan="stage5", experiments=["a"])])
    store.append([event(t.COMPONENT_SILENT, t.SYSTEM_RUN, 1, component="agent@gpu1")])


def test_each_run_has_its_status_and_the_system_run_is_hidden(store):
    history(store)
    found = {r.run: r.status for r in rows(store)}
    assert found == {"launched-only": "launched", "going": "running", "asked": "stopping", "halted": "stopped",
                     "done": "finished", "crashed": "failed", "plan-stage5": "plan running"}  # fmt: skip
    assert {r.run: r.status for r in rows(store, everything=True)}[t.SYSTEM_RUN] == "system"


def test_the_batched_read_is_the_fold_of_each_log_and_moves_the_snapshots(store, monkeypatch):
    monkeypatch.setattr(run_view, "PAGE", 7)  # some runs hold more than one page after their snapshot
    history(store)
    store.append([metric("going", 2 + i, step=2 + i, loss=1.0 / i) for i in range(1, 20)])
    runs = ["launched-only", "going", "asked", "halted", "done", "crashed", "never-seen"]
    states = run_view.run_states(store, runs)
    for run in runs:
        assert states[run].to_dict() == fold(events_of(store, run)).to_dict(), run
    assert run_view.load(store, "going")[0].step == 21  # saved: the next read folds only what is new
    store.append([metric("going", 40, step=40, loss=0.1)])
    assert run_view.run_states(store, ["going"])["going"].step == 40
    assert run_view.run_state(store, "going").to_dict() == fold(events_of(store, "going")).to_dict()


def test_the_command_prints_a_table_and_all_shows_the_system_run(store, settings_file):
    history(store)

    def runs(*extra: str) -> list[str]:
        proc = subprocess.run(cli_argv(settings_file, "runs", *extra), capture_output=True, text=True, cwd=REPO,
                              check=True, timeout=60)  # fmt: skip
        return proc.stdout.splitlines()

    head, *lines = runs()
    assert head.split() == ["RUN", "STATUS", "HOST", "LAST", "EVENT"]
    by_run = {line.split()[0]: line.split()[1] for line in lines}
    assert by_run["halted"] == "stopped" and by_run["crashed"] == "failed" and t.SYSTEM_RUN not in by_run
    assert any(line.split()[:2] == [t.SYSTEM_RUN, "system"] for line in runs("--all"))


def test_no_runs_yet(store, settings_file):
    store.append([event(t.COMPONENT_SILENT, t.SYSTEM_RUN, 1, component="agent@gpu1")])  # the system run alone
    proc = subprocess.run(cli_argv(settings_file, "runs"), capture_output=True, text=True, cwd=REPO, check=True,
                          timeout=60)  # fmt: skip
    assert proc.stdout.startswith("no runs yet")


def test_last_event_is_the_runs_last_activity_and_orders_the_runs(store):
    # the agent's heartbeats and a /tw status go on after "ended"'s end: they neither date it nor put it first
    store.append([event(t.RUN_LAUNCHED, "ended", 1), metric("ended", 2, step=2, loss=1.0),
                  event(t.RUN_FINISHED, "ended", 3, exit_code=0)])  # fmt: skip
    store.append([event(t.RUN_LAUNCHED, "live", 50), metric("live", 1100, step=5, loss=1.0)])
    store.append([event(t.AGENT_HEARTBEAT, "ended", 600, interval_s=30.0),
                  event(t.COMMAND_RECEIVED, "ended", 700, user="U1", command="status", text="ended")])  # fmt: skip
    found = rows(store)
    assert [(r.run, r.last_ts) for r in found] == [("live", 2100.0), ("ended", 2003.0)]

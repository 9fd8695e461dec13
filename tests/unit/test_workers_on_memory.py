"""The workers' evaluation of a run, and the CLI's readers of what it decided, on the in-memory store.

`evaluate_next` is the read and the evaluation the workers' turn runs (workers/process.py), here with a
MemoryStore for the log and the test in place of the turn's transaction: what it appends is appended to the
same log, so it is read back as a turn reads it. The Redis turn with its WATCHed checkpoint:
tests/integration/test_processing.py and test_policy_worker.py.
"""

from __future__ import annotations

import time
from dataclasses import replace

from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.memory import MemoryStore
from trainwarden.ops.stop import stop_asked
from trainwarden.policies.default import default_policy
from trainwarden.workers.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from trainwarden.workers.evaluate import evaluate_next
from trainwarden.workers.pending import BuildEvidence, StopRun

from tests.helpers import metric, nan_metric
from trainwarden.cli.launch import launched_since
from trainwarden.cli.policy_report import build_report

RUN = "exp01"


def types(store: MemoryStore, run: str = RUN) -> list[str]:
    return [e.type for _, e in store.iter_run(run) if isinstance(e, Event)]


def turn(store: MemoryStore, cp: Checkpoint, *, now: float = 5000.0):
    return evaluate_next(store, default_policy(), cp, run=RUN, host="w1", clock=lambda: now, count=2000)


def copied(cp: Checkpoint) -> Checkpoint:
    return decode_checkpoint(encode_checkpoint(replace(cp, stored=None)).applied())  # written whole


def nan_run() -> MemoryStore:
    store = MemoryStore()
    store.append([metric(RUN, i, step=i, loss=1.0) for i in range(1, 4)] + [nan_metric(RUN, 4)])
    return store


def test_a_nan_metric_is_evaluated_to_a_stop_appended_to_the_log_and_read_back_as_pending_actions():
    store, cp = nan_run(), Checkpoint()
    evaluated = turn(store, cp)
    assert evaluated is not None
    entries, step, now = evaluated
    assert len(entries) == 4 and now == 5000.0 and cp.after == entries[-1][0]
    assert all(store.append(step.outputs))
    assert types(store)[4:] == [t.POLICY_APPLIED, t.DECISION, t.ANOMALY_OPENED, t.DECISION, t.STOP_REQUESTED]
    (stop,) = [e for e in step.outputs if e.type == t.DECISION and e.data["decision"] == t.STOP]
    assert stop.data["rule"] == "loss-nonfinite" and stop.data["run_host"] == "gpu1"
    read_back = turn(store, cp)  # the next turn reads the outputs: the STOP and its request become actions
    assert read_back is not None and read_back[1].outputs == []
    assert [a["kind"] for a in cp.pending] == [BuildEvidence.kind, StopRun.kind]
    assert turn(store, cp) is None  # nothing left after the checkpoint


def test_a_turn_evaluated_again_from_its_checkpoint_appends_nothing_twice():
    store, cp = nan_run(), Checkpoint()
    before = copied(cp)  # as stored: a turn whose commit was lost starts from it again
    evaluated = turn(store, cp)
    assert evaluated is not None and all(store.append(evaluated[1].outputs))
    length = store.length(RUN)
    again = turn(store, before, now=6000.0)  # later, from the same checkpoint: the same outputs, the same ids
    assert again is not None and [e.id for e in again[1].outputs] == [e.id for e in evaluated[1].outputs]
    assert store.append(again[1].outputs) == [None] * len(again[1].outputs)
    assert store.length(RUN) == length


def test_the_policy_report_and_the_launch_command_read_the_workers_stop_on_any_backend():
    store, cp = nan_run(), Checkpoint()
    started = time.time()
    launched = make_event(t.RUN_LAUNCHED, run=RUN, host="ctl", producer="launch/exp01", seq=1,
                          data={"server": "gpu1"}, ts=started)  # fmt: skip
    store.append_one(launched)
    evaluated = turn(store, cp, now=started + 1)
    assert evaluated is not None
    store.append(evaluated[1].outputs)
    report = build_report(store, since=started - 60, until=started + 60)
    assert [(r.rule, r.policy, r.stop, r.runs) for r in report.rules] == [("loss-nonfinite", "default", 1, [RUN])]
    assert report.runs_read == 1
    assert stop_asked(store, RUN, after=started) == "rule loss-nonfinite asked for it (loss=nan at step 4)"
    assert stop_asked(store, RUN, after=started + 2) is None  # asked before that
    assert launched_since(store, RUN, started) == launched and launched_since(store, RUN, started + 1) is None

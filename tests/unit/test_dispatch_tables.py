"""The dispatch tables that replaced if-chains on event types: each handles exactly the declared types it
should, refuses a second handler for one, and an event of a type it does not handle keeps the default."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from trainwarden.bot import messages, stages, watcher_messages
from trainwarden.bot.stages import NotifyState, observe
from trainwarden.events import registry
from trainwarden.events import types as t
from trainwarden.events.dispatch import Dispatch
from trainwarden.events.envelope import make_event
from trainwarden.policies import engine
from trainwarden.policies.default import default_policy
from trainwarden.policies.state import PolicyState
from trainwarden.workers import evaluate
from trainwarden.workers.checkpoint import Checkpoint

TABLES = [  # (table, the types it handles, one of them to register twice)
    (evaluate._READ_BACK, {t.DECISION, t.STOP_REQUESTED, t.STOP_HELD, t.RUN_FAILED, t.STOP_CANCELLED, t.ANOMALY_OPENED,
                           t.PROCESS_DUMP}, t.DECISION),
    (messages._NOTICES, {t.DECISION_SHADOW, t.ANOMALY_OPENED, t.ANOMALY_RESOLVED, t.DECISION, t.STOP_DONE,
                         t.STOP_FAILED, t.STOP_CANCELLED, t.RUN_FAILED, t.POLICY_REJECTED, t.RUN_LAUNCHED,
                         t.RESUME_SKIPPED, t.LAUNCH_FAILED, t.PROCESS_DUMP, *watcher_messages.TEXTS}, t.STOP_DONE),
    (stages._OBSERVE, {t.RUN_LAUNCHED, t.ANOMALY_OPENED, t.ANOMALY_RESOLVED, t.LOG_LINE, t.DECISION, t.STOP_DONE,
                       t.RUN_FINISHED, t.RUN_FAILED, t.STOP_REQUESTED, t.STOP_CANCELLED, t.EVIDENCE_BUILT,
                       t.EVIDENCE_FAILED, t.SNOOZE_SET}, t.SNOOZE_SET),
    (engine._LIFECYCLE, {t.RUN_LAUNCHED, t.STOP_REQUESTED, t.STOP_CANCELLED, t.RUN_FINISHED, t.RUN_FAILED,
                         t.STOP_DONE}, t.RUN_FAILED),
]  # fmt: skip


@pytest.mark.parametrize(("table", "handled", "twice"), TABLES, ids=[table.name for table, _, _ in TABLES])
def test_a_table_handles_declared_types_once_each(table: Dispatch[Any], handled: set[str], twice: str) -> None:
    assert set(table.handlers) == handled
    assert handled <= set(registry.REGISTRY)  # every handled type is declared
    before = dict(table.handlers)
    with pytest.raises(ValueError, match=f"{table.name}: '{twice}' has a handler already"):
        table.on(twice)(print)
    assert table.handlers == before  # the first handler stays


def test_the_notifiers_fold_reads_only_types_from_its_feed() -> None:
    assert set(stages._OBSERVE.handlers) <= stages.INPUT_TYPES


def test_the_read_back_leaves_other_types_alone() -> None:
    cp = Checkpoint()
    cp.guard = {"decision": "eval/r:1", "rule": "x", "reason": "y", "confirm_s": 60.0, "deadline": 1e12}
    make: Callable[..., Any] = make_event
    events = [make(typ, run="r", host="w", producer="p", seq=i, data={"decision": "eval/r:1"}, ts=float(i))
              for i, typ in enumerate((t.EVIDENCE_BUILT, t.SNOOZE_SET, t.DECISION), start=2)]  # fmt: skip
    evaluate.evaluate_entries(default_policy(), cp, [(f"{e.seq}-0", e) for e in events], run="r", host="w", now=9.0)
    assert cp.pending == [] and cp.guard is not None  # no handler, or a decision that is no STOP: nothing


def test_a_type_without_a_builder_or_a_payload_that_needs_nobody_gets_none() -> None:
    def event(typ: str, **data: Any) -> Any:
        return make_event(typ, run="r", host="h", producer="p", seq=1, data=data)

    assert messages.notification_builder(event(t.METRIC, loss=1.0)) is None  # no entry: the default
    assert messages.notification_builder(event(t.EVIDENCE_BUILT, path="/x")) is None
    assert messages.notification_builder(event(t.DECISION, decision=t.CONTINUE)) is None
    assert messages.notification_builder(event(t.RUN_LAUNCHED, server="s")) is None  # by hand: nobody asked on Slack
    assert messages.notification_builder(event(t.ANOMALY_RESOLVED, rule="x", shadow=True)) is None
    assert messages.notification_builder(event(t.ANOMALY_RESOLVED, rule="x")) is not None


def test_the_notifiers_fold_leaves_state_alone_for_other_types_and_shadow_anomalies() -> None:
    def event(typ: str, **data: Any) -> Any:
        return make_event(typ, run="r", host="h", producer="p", seq=1, data=data)

    state = NotifyState(open_rules=["loss"])
    for quiet in (event(t.METRIC, loss=1.0), event(t.ANOMALY_CHARTED, rule="x"),
                  event(t.ANOMALY_OPENED, rule="s", shadow=True), event(t.DECISION, decision=t.WAIT)):  # fmt: skip
        observe(state, quiet)
    assert state == NotifyState(open_rules=["loss"])
    observe(state, event(t.RUN_LAUNCHED, server="s", requested_by="U1", shadow=True))  # a launch always counts
    assert state == NotifyState(owners=["U1"])


def test_an_input_type_without_a_lifecycle_handler_is_read_by_the_rules_until_the_run_ends() -> None:
    def event(seq: int, typ: str, **data: Any) -> Any:
        return make_event(typ, run="r", host="h", producer="p", seq=seq, data=data, ts=float(seq))

    policy, state = default_policy(), PolicyState()
    engine.evaluate(policy, state, event(1, t.RUN_LAUNCHED, server="s"))
    assert engine.evaluate(policy, state, event(2, t.METRIC, step=1, loss=float("nan")))  # the default: the rules
    assert engine.evaluate(policy, state, event(3, t.STOP_REQUESTED, by="slack")) == [] and state.ended
    assert engine.evaluate(policy, state, event(4, t.METRIC, step=2, loss=float("nan"))) == []  # ended: nothing

"""The dispatch tables that replaced if-chains on event types: each handles exactly the declared types it
should, refuses a second handler for one, and an event of a type it does not handle keeps the default."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from trainwarden.events import registry
from trainwarden.events import types as t
from trainwarden.events.dispatch import Dispatch
from trainwarden.events.envelope import make_event
from trainwarden.policies.default import default_policy
from trainwarden.workers import evaluate
from trainwarden.workers.checkpoint import Checkpoint


def _refuses_a_second_handler(table: Dispatch[Any], event_type: str) -> None:
    before = dict(table.handlers)
    with pytest.raises(ValueError, match=f"{table.name}: '{event_type}' has a handler already"):
        table.on(event_type)(print)
    assert table.handlers == before  # the first handler stays


def _declared(table: Dispatch[Any]) -> None:
    assert set(table.handlers) <= set(registry.REGISTRY), table.name


def test_the_workers_read_back_handles_the_action_types() -> None:
    table = evaluate._READ_BACK
    _declared(table)
    assert set(table.handlers) == {
        t.DECISION, t.STOP_REQUESTED, t.RUN_FAILED, t.STOP_CANCELLED, t.ANOMALY_OPENED, t.PROCESS_DUMP
    }  # fmt: skip
    _refuses_a_second_handler(table, t.DECISION)


def test_the_read_back_leaves_other_types_alone() -> None:
    cp = Checkpoint()
    cp.guard = {"decision": "eval/r:1", "rule": "x", "reason": "y", "confirm_s": 60.0, "deadline": 1e12}
    make: Callable[..., Any] = make_event
    events = [make(typ, run="r", host="w", producer="p", seq=i, data={"decision": "eval/r:1"}, ts=float(i))
              for i, typ in enumerate((t.EVIDENCE_BUILT, t.SNOOZE_SET, t.DECISION), start=2)]  # fmt: skip
    evaluate.evaluate_entries(default_policy(), cp, [(f"{e.seq}-0", e) for e in events], run="r", host="w", now=9.0)
    assert cp.pending == [] and cp.guard is not None  # no handler, or a decision that is no STOP: nothing


def test_the_notices_builders_handle_what_needs_a_person() -> None:
    from trainwarden.bot import messages, watcher_messages

    table = messages._NOTICES
    _declared(table)
    assert set(table.handlers) == {
        t.DECISION_SHADOW, t.ANOMALY_OPENED, t.ANOMALY_RESOLVED, t.DECISION, t.STOP_DONE, t.STOP_FAILED,
        t.STOP_CANCELLED, t.RUN_FAILED, t.POLICY_REJECTED, t.RUN_LAUNCHED, t.RESUME_SKIPPED, t.LAUNCH_FAILED,
        t.PROCESS_DUMP, *watcher_messages.TEXTS,
    }  # fmt: skip
    _refuses_a_second_handler(table, t.STOP_DONE)


def test_a_type_without_a_builder_or_a_payload_that_needs_nobody_gets_none() -> None:
    from trainwarden.bot.messages import notification_builder

    def event(typ: str, **data: Any) -> Any:
        return make_event(typ, run="r", host="h", producer="p", seq=1, data=data)

    assert notification_builder(event(t.METRIC, loss=1.0)) is None  # no entry: the default
    assert notification_builder(event(t.EVIDENCE_BUILT, path="/x")) is None
    assert notification_builder(event(t.DECISION, decision=t.CONTINUE)) is None
    assert notification_builder(event(t.RUN_LAUNCHED, server="s")) is None  # by hand: nobody asked on Slack
    assert notification_builder(event(t.ANOMALY_RESOLVED, rule="x", shadow=True)) is None
    assert notification_builder(event(t.ANOMALY_RESOLVED, rule="x")) is not None


def test_the_notifiers_fold_handles_what_changes_its_state() -> None:
    from trainwarden.bot import stages

    table = stages._OBSERVE
    _declared(table)
    assert set(table.handlers) == {
        t.RUN_LAUNCHED, t.ANOMALY_OPENED, t.ANOMALY_RESOLVED, t.LOG_LINE, t.DECISION, t.STOP_DONE, t.RUN_FINISHED,
        t.RUN_FAILED, t.STOP_REQUESTED, t.STOP_CANCELLED, t.EVIDENCE_BUILT, t.EVIDENCE_FAILED, t.SNOOZE_SET,
    }  # fmt: skip
    assert set(table.handlers) <= stages.INPUT_TYPES  # a type it folds is read from the feed
    _refuses_a_second_handler(table, t.SNOOZE_SET)


def test_the_notifiers_fold_leaves_state_alone_for_other_types_and_shadow_anomalies() -> None:
    from trainwarden.bot.stages import NotifyState, observe

    def event(typ: str, **data: Any) -> Any:
        return make_event(typ, run="r", host="h", producer="p", seq=1, data=data)

    state = NotifyState(open_rules=["loss"])
    for quiet in (event(t.METRIC, loss=1.0), event(t.ANOMALY_CHARTED, rule="x"),
                  event(t.ANOMALY_OPENED, rule="s", shadow=True), event(t.DECISION, decision=t.WAIT)):  # fmt: skip
        observe(state, quiet)
    assert state == NotifyState(open_rules=["loss"])
    observe(state, event(t.RUN_LAUNCHED, server="s", requested_by="U1", shadow=True))  # a launch always counts
    assert state == NotifyState(owners=["U1"])


def test_the_engines_lifecycle_handles_launches_stops_and_ends() -> None:
    from trainwarden.policies import engine

    table = engine._LIFECYCLE
    _declared(table)
    assert set(table.handlers) == {
        t.RUN_LAUNCHED, t.STOP_REQUESTED, t.STOP_CANCELLED, t.RUN_FINISHED, t.RUN_FAILED, t.STOP_DONE
    }  # fmt: skip
    _refuses_a_second_handler(table, t.RUN_FAILED)


def test_an_input_type_without_a_lifecycle_handler_is_read_by_the_rules_until_the_run_ends() -> None:
    from trainwarden.policies.engine import evaluate
    from trainwarden.policies.state import PolicyState

    def event(seq: int, typ: str, **data: Any) -> Any:
        return make_event(typ, run="r", host="h", producer="p", seq=seq, data=data, ts=float(seq))

    policy, state = default_policy(), PolicyState()
    evaluate(policy, state, event(1, t.RUN_LAUNCHED, server="s"))
    assert evaluate(policy, state, event(2, t.METRIC, step=1, loss=float("nan")))  # the default: the rules
    assert evaluate(policy, state, event(3, t.STOP_REQUESTED, by="slack")) == [] and state.ended
    assert evaluate(policy, state, event(4, t.METRIC, step=2, loss=float("nan"))) == []  # ended: nothing

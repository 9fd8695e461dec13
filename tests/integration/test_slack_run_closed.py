"""A run's parent message after the run stopped or failed, through the local Slack Web API server: it once kept
its Stop run and Snooze buttons (which could no longer act) and said its "Try:" remedy twice. Now a stop done
or a failure closes it with chat.update: its first line and the outcome in one line, no buttons; and a
chat.update Slack refuses costs that edit only, not the STOP posts or the notifier."""

import json

import pytest
from trainwarden.events import types as t

from tests.helpers import events_of
from tests.integration.test_slack_notifier import Evaluator, drain, notifier

pytestmark = pytest.mark.redis

REMEDY = "lower the learning rate"


def anomaly(ev: Evaluator):
    return ev.opened("loss-spike", "loss=9 > 2x recent average 2.4", remedy=REMEDY)


def stop(ev: Evaluator):
    return [
        ev(t.DECISION, decision="STOP", rule="loss-spike", reason="loss=9 at step 12", remedy=REMEDY),
        ev(t.STOP_REQUESTED, by="slack", user="U0ALICE", reason="loss=9"),
        ev(t.STOP_DONE, detail="killed tmux session train-exp05"),
    ]


def shown(blocks) -> str:
    """What Slack shows of a message: its sections' and contexts' texts (not its buttons' values)."""
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
    texts = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    texts += [e["text"] for b in blocks if b["type"] == "context" for e in b["elements"]]
    return "\n".join(texts)


def test_a_stop_closes_the_anomaly_parent_without_buttons_and_its_remedy_is_said_once(store, slack_api):
    ev = Evaluator("exp05")
    store.append([anomaly(ev), *stop(ev)])
    drain(notifier(store, slack_api))

    parent, *replies = slack_api.messages
    posted = next(params for name, params in slack_api.calls if name == "chat.postMessage")
    assert shown(posted["blocks"]).count("Try:") == 1  # the line says it; the context under it no longer repeats it
    assert [r.text.split(" ", 1)[0] for r in replies] == ["STOP", "STOPPED"]  # the STOP posts are there
    headline = f"ANOMALY exp05@gpu1: loss=9 > 2x recent average 2.4 (loss-spike, warning). Try: {REMEDY}."
    assert parent.updates[-1] == f"{headline} [run stopped by <@U0ALICE>]"
    update = [params for name, params in slack_api.calls if name == "chat.update"][-1]
    assert update["ts"] == parent.ts
    assert not any(b["type"] == "actions" for b in parent.blocks)  # no Stop run, Snooze or Status
    assert shown(parent.blocks).count("Try:") == 1


def test_a_failed_run_closes_its_parent_with_the_exit_code(store, slack_api):
    ev = Evaluator("exp06")
    store.append([anomaly(ev), ev(t.RUN_FAILED, exit_code=1, log_tail=["Traceback", "ValueError: x"])])
    drain(notifier(store, slack_api))

    parent, failed = slack_api.messages
    assert failed.text.startswith("FAILED exp06@gpu1") and failed.thread_ts == parent.ts
    assert parent.updates[-1].endswith("[run failed, exit code 1]")
    assert not any(b["type"] == "actions" for b in parent.blocks)


def test_a_refused_update_loses_no_stop_post_and_the_notifier_goes_on(store, slack_api, caplog):
    slack_api.fail("chat.update", "refuse:cant_update_message")
    ev = Evaluator("exp07")
    store.append([anomaly(ev), *stop(ev)])
    n = notifier(store, slack_api)
    drain(n)

    parent, *replies = slack_api.messages
    assert [r.text.split(" ", 1)[0] for r in replies] == ["STOP", "STOPPED"]
    assert ("chat.update", ["refuse:cant_update_message"]) in slack_api.refused  # it was tried, and refused
    assert parent.updates == []  # the parent stays as it was
    sent = {e.data["key"] for e in events_of(store, "exp07", t.NOTIFICATION_SENT)}
    assert len(sent) == 3  # the anomaly, the STOP and the STOPPED: each recorded sent, none lost
    assert "Slack refused an update" in caplog.text
    # the notifier goes on: the next event of another run is posted
    store.append([Evaluator("exp08").opened("grad-norm", "grad_norm=180 > 100")])
    drain(n)
    assert slack_api.messages[-1].text.startswith("ANOMALY exp08@gpu1")


def test_a_run_that_finished_closes_its_parent_but_not_after_a_stop(store, slack_api):
    ev, stopped = Evaluator("exp09"), Evaluator("exp10")
    store.append([anomaly(ev), ev(t.RUN_FINISHED, exit_code=0)])
    store.append([anomaly(stopped), *stop(stopped), stopped(t.RUN_FINISHED, exit_code=0)])
    drain(notifier(store, slack_api))

    finished = next(m for m in slack_api.parents() if m.key and m.key.startswith("eval/exp09:"))
    assert finished.updates == [f"ANOMALY exp09@gpu1: loss=9 > 2x recent average 2.4 (loss-spike, warning). "
                                f"Try: {REMEDY}. [run finished]"]  # fmt: skip
    assert not any(b["type"] == "actions" for b in finished.blocks)
    assert slack_api.replies(finished.ts) == []  # a run that finished posts nothing
    closed = next(m for m in slack_api.parents() if m.key and m.key.startswith("eval/exp10:"))
    assert closed.updates[-1].endswith("[run stopped by <@U0ALICE>]")  # the stop's outcome stays

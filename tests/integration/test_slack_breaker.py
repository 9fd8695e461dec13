"""The stop breaker's Slack side (#38 item 3), through the local Slack Web API server: fifty held STOPs once
posted fifty "STOP ... stopping" messages that stopped nothing. Now the first held STOP of an episode posts one
STOP BREAKER message to the channel, each later one edits it (chat.update), the held runs' STOP messages say
they were held, and Release all / Cancel all act on every held run at once; a NaN STOP meanwhile is posted as
always."""

import json
import math

import pytest
from trainwarden.events import breaker
from trainwarden.events import types as t

from tests.helpers import events_of, wait_for
from tests.integration.test_slack_notifier import Evaluator, drain, notifier
from tests.slack_bot import ADMIN, STRANGER, click, responses, running_bot

pytestmark = pytest.mark.redis

RUNS = [f"exp{i:02d}" for i in range(1, 6)]


def held_stop(store, run: str, *, held: bool = True):
    """A policy STOP of a threshold rule, its request, and what the workers record when the breaker holds it
    (`stop.held`, the run on the held list: events/breaker.py, as workers/breaker.py calls it)."""
    ev = Evaluator(run)
    decision = ev(t.DECISION, decision="STOP", rule="loss-high", reason=f"loss=3.{run[-1]} > 0.001")
    request = ev(t.STOP_REQUESTED, by="policy", rule="loss-high", reason=f"loss=3.{run[-1]} > 0.001",
                 decision=decision.id)  # fmt: skip
    store.append([decision, request])
    entry = {"request": request.id, "decision": decision.id, "rule": "loss-high", "reason": request.data["reason"],
             "stops": 3, "max_stops": 3, "window_s": 600.0, "run_host": "gpu1"}  # fmt: skip
    breaker.hold(store.redis, store.keys, run, {**entry, "ts": 2003.0})
    store.append([ev(t.STOP_HELD, **entry)])
    return decision


def nan_stop(store, run: str) -> None:
    ev = Evaluator(run)
    store.append([
        ev(t.DECISION, decision="STOP", rule="loss-nonfinite", reason="loss=nan at step 1200",
           values={"loss": math.nan, "step": 1200}),
        ev(t.STOP_REQUESTED, by="policy", rule="loss-nonfinite", reason="loss=nan at step 1200"),
        ev(t.STOP_DONE, detail="killed tmux session train-" + run),
    ])  # fmt: skip


def breaker_posts(slack_api):
    return [m for m in slack_api.messages if m.text.startswith("STOP BREAKER")]


def test_five_held_stops_post_one_message_edited_four_times_and_a_nan_stop_goes_out_as_always(store, slack_api):
    n = notifier(store, slack_api)
    held_stop(store, RUNS[0])
    nan_stop(store, "exp99")  # another run's NaN, in the middle of the episode
    for run in RUNS[1:]:
        held_stop(store, run)
    drain(n)

    (message,) = breaker_posts(slack_api)
    posts = [params for name, params in slack_api.calls if name == "chat.postMessage"
             and str(params.get("text", "")).startswith("STOP BREAKER")]  # fmt: skip
    assert len(posts) == 1 and message.channel == "C1" and message.thread_ts is None  # the channel, no thread
    edits = [params for name, params in slack_api.calls if name == "chat.update" and params["ts"] == message.ts]
    assert len(edits) == 4  # the list grows: one edit per later held STOP, no new message
    assert posts[0]["text"].startswith(
        "STOP BREAKER: 1 policy STOPs held (3 carried out in the last 10m; limit 3): "
        "exp01 (loss-high: loss=3.1 > 0.001) — nothing is stopped until you choose"
    )
    assert message.updates[-1] == (
        "STOP BREAKER: 5 policy STOPs held (3 carried out in the last 10m; limit 3): "
        + ", ".join(f"{r} (loss-high: loss=3.{r[-1]} > 0.001)" for r in RUNS)
        + " — nothing is stopped until you choose"
    )
    actions = [b for b in message.blocks if b["type"] == "actions"]
    assert [e["text"]["text"] for e in actions[0]["elements"]] == ["Release all", "Cancel all"]
    # each held run's STOP says it was held: none of them reads as if it were being stopped
    for run in RUNS:
        stop = next(m for m in slack_api.messages if m.text.startswith(f"STOP {run}@"))
        assert stop.updates[-1].endswith("[held by the stop breaker: not stopped; see the STOP BREAKER message]")
    # the NaN STOP was posted at once, and its outcome, with no word of the breaker
    nan = [m for m in slack_api.messages if "exp99" in m.text]
    assert [m.text.split(" ", 1)[0] for m in nan] == ["STOP", "STOPPED"]
    assert not any("breaker" in u for m in nan for u in m.updates)


@pytest.fixture
def bot(redis_server, slack_api):
    with running_bot(redis_server.url, slack_api) as running:
        yield running


def posted_breaker(store, slack_api):
    decisions = {run: held_stop(store, run) for run in RUNS}
    wait_for(lambda: breaker_posts(slack_api) and len(breaker_posts(slack_api)[0].updates) == 4, what="5 listed")
    (message,) = breaker_posts(slack_api)
    release, cancel = (e for b in message.blocks if b["type"] == "actions" for e in b["elements"])
    return message, decisions, json.loads(release["value"]), json.loads(cancel["value"])


def test_release_all_asks_for_every_held_stop_by_the_clicking_person(bot, store, slack_api):
    message, decisions, release, cancel = posted_breaker(store, slack_api)
    click(bot, slack_api, "tw_breaker_release", release, user=STRANGER)  # not on the stop allow-list
    assert responses(slack_api, 1)[0][1]["text"].startswith("Sorry")
    assert all(events_of(store, run, t.STOP_REQUESTED)[-1].data["by"] == "policy" for run in RUNS)

    click(bot, slack_api, "tw_breaker_release", release)
    assert responses(slack_api, 2)[1][1]["text"] == f"<@{ADMIN}> released 5 held STOP(s); the outcomes go to the " \
                                                   "runs' threads."  # fmt: skip
    for run in RUNS:
        asked = events_of(store, run, t.STOP_REQUESTED)[-1]
        assert asked.data["by"] == "slack" and asked.data["user"] == ADMIN
        assert asked.data["decision"] == decisions[run].id
    outcome = f"STOP BREAKER: released by <@{ADMIN}>: stopping {', '.join(RUNS)}"
    wait_for(lambda: message.updates[-1] == outcome, what="the outcome")
    assert not any(b["type"] == "actions" for b in message.blocks)
    # Cancel all, pressed late, changes nothing
    click(bot, slack_api, "tw_breaker_cancel", cancel)
    assert responses(slack_api, 3)[2][1]["text"] == "The held STOPs were already released or cancelled; nothing " \
                                                    "changed."  # fmt: skip
    assert all(events_of(store, run, t.STOP_CANCELLED) == [] for run in RUNS)


def test_cancel_all_keeps_every_held_run_running_and_empties_the_held_list(bot, store, slack_api):
    message, decisions, _release, cancel = posted_breaker(store, slack_api)
    click(bot, slack_api, "tw_breaker_cancel", cancel)
    assert responses(slack_api, 1)[0][1]["text"] == f"<@{ADMIN}> cancelled 5 held STOP(s); those runs keep running."
    for run in RUNS:
        (cancelled,) = events_of(store, run, t.STOP_CANCELLED)
        assert cancelled.data["user"] == ADMIN and cancelled.data["decision"] == decisions[run].id
        assert events_of(store, run, t.SNOOZE_SET)[-1].data["rule"] == "loss-high"  # as Keep running does
        assert events_of(store, run, t.STOP_REQUESTED)[-1].data["by"] == "policy"  # no stop asked
    assert breaker.held_stops(store.redis, store.keys) == {}
    wait_for(lambda: message.updates[-1] == f"STOP BREAKER: cancelled by <@{ADMIN}>: {', '.join(RUNS)} keep running",
             what="the outcome")  # fmt: skip
    assert not any(b["type"] == "actions" for b in message.blocks)
    # a STOP held after the choice opens a new episode: a new message
    held_stop(store, "exp06")
    wait_for(lambda: len(breaker_posts(slack_api)) == 2, what="a second message")
    assert breaker_posts(slack_api)[1].text.startswith("STOP BREAKER: 1 policy STOPs held")

"""`/tw`, the thread actions (Status button, the "Run actions" message shortcut), stopped runs and NaN
in /status, through the bot's HTTP endpoint with signed requests and the local Slack Web API server."""

import json

import pytest
from trainwarden.bot.commands import COMMANDS
from trainwarden.bot.stages import SYSTEM_RUN
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event

from tests.helpers import events_of, metric, nan_metric, wait_for
from tests.slack_bot import ADMIN, STRANGER, VIEWER, bot_process, click, command, responses, running_bot, shortcut

pytestmark = [pytest.mark.redis]


def event(event_type, run, seq, **data):
    return make_event(event_type, run=run, host="gpu1", producer=f"gpu1/test/{run}", seq=seq, data=data)


def anomaly(run, seq, rule="loss-spike"):
    return event(t.ANOMALY_OPENED, run, seq, rule=rule, severity="critical", reason=f"{rule} at step 30",
                 values={"loss": 9.0}, remedy=None, decision=None, trigger="x", policy="p")  # fmt: skip


@pytest.fixture
def bot(redis_server, slack_api, store):
    with running_bot(redis_server.url, slack_api) as running:
        store.append([metric("exp01", i, step=i * 10, loss=2.0 - i / 100) for i in range(1, 6)])
        yield running


def stopped(store, run):
    store.append([event(t.STOP_REQUESTED, run, 90, by="cli", reason="done"), event(t.STOP_DONE, run, 91)])


def buttons_of(blocks):
    return {e["action_id"]: e for b in blocks if b["type"] == "actions" for e in b["elements"]}


def test_tw_subcommands_run_the_commands_under_their_allow_lists(bot, slack_api, store):
    _, body = command(bot, slack_api, "tw", "status", user=VIEWER)
    assert body["text"].startswith("exp01@gpu1 running step 50 loss 1.95 ")
    _, body = command(bot, slack_api, "tw", "status exp01", user=VIEWER)
    assert body["text"].startswith("*exp01@gpu1* is running")
    (received,) = events_of(store, "exp01", t.COMMAND_RECEIVED)
    assert received.data == {"command": "/tw status", "user": VIEWER, "channel": "C1", "via": "slash",
                             "text": "status exp01"}  # fmt: skip
    # each subcommand keeps its own allow-list: a viewer may look, not stop
    _, body = command(bot, slack_api, "tw", "stop exp01 because", user=VIEWER)
    assert body["text"].startswith("Sorry, you are not allowed to use /tw stop here.")
    (denied,) = events_of(store, "exp01", t.COMMAND_DENIED)
    assert denied.data["command"] == "/tw stop" and denied.data["user"] == VIEWER
    _, body = command(bot, slack_api, "tw", "stop exp01 lr too high")
    assert body["text"] == "Stop exp01? Reason: lr too high"
    assert events_of(store, "exp01", t.STOP_REQUESTED) == []  # the same confirmation as /stop's
    _, body = command(bot, slack_api, "tw", "snooze exp01 loss-spike 2h")
    assert body["response_type"] == "in_channel" and body["text"].startswith(f"<@{ADMIN}> snoozed loss-spike on exp01")


def test_tw_help_and_did_you_mean_are_answered_to_anyone(bot, slack_api, store):
    for text in ("help", ""):
        _, body = command(bot, slack_api, "tw", text, user=STRANGER)
        assert body["response_type"] == "ephemeral" and body["text"].startswith("*/tw* commands:")
        assert all(f"`/tw {name} " in body["text"] for name in COMMANDS)
    _, body = command(bot, slack_api, "tw", "stpo exp01", user=STRANGER)
    assert body["text"].startswith("Unknown command /tw stpo. Did you mean /tw stop?")
    assert events_of(store, "exp01", t.COMMAND_DENIED) == [] and events_of(store, "exp01", t.STOP_REQUESTED) == []


@pytest.mark.parametrize(("name", "text"), [("tw", "stop exp01 done"), ("stop", "exp01 done")])
def test_stop_on_a_stopped_run_says_so_without_a_stop_button(bot, slack_api, store, name, text):
    stopped(store, "exp01")
    _, body = command(bot, slack_api, name, text)
    assert body["text"] == "exp01 has already stopped; nothing was done."
    assert "blocks" not in body or not buttons_of(body["blocks"])
    assert len(events_of(store, "exp01", t.STOP_REQUESTED)) == 1  # the one that stopped it


def test_stop_now_of_a_guarded_stop_on_a_run_stopped_meanwhile_changes_nothing(bot, slack_api, store):
    decision = event(t.DECISION, "exp01", 6, decision="STOP", rule="r", reason="x", confirm_s=300)
    store.append([decision])
    stopped(store, "exp01")  # by hand (the CLI), before anyone answered the guard
    click(bot, slack_api, "tw_stop_now", {"run": "exp01", "rule": "r", "decision": decision.id})
    (_, late) = responses(slack_api, 1)[0]
    assert late["text"] == "exp01 has already stopped; nothing was done."
    assert len(events_of(store, "exp01", t.STOP_REQUESTED)) == 1  # the CLI's


def test_a_thread_has_status_snooze_and_stop_as_buttons_and_a_stale_stop_changes_nothing(bot, slack_api, store):
    store.append([anomaly("exp01", 6)])
    (posted,) = wait_for(lambda: [m for m in slack_api.messages if m.text.startswith("ANOMALY exp01")], what="post")
    on_message = buttons_of(posted.blocks)
    assert list(on_message) == ["tw_snooze", "tw_stop_run", "tw_status"]
    # Status: the run's detail, privately, with Snooze and Stop
    click(bot, slack_api, "tw_status", json.loads(on_message["tw_status"]["value"]), user=ADMIN)
    (_, panel) = responses(slack_api, 1)[0]
    assert panel["response_type"] == "ephemeral" and panel["replace_original"] in (False, "false")
    assert panel["text"].startswith("*exp01@gpu1* is running")
    panel_buttons = buttons_of(json.loads(panel["blocks"]) if isinstance(panel["blocks"], str) else panel["blocks"])
    assert list(panel_buttons) == ["tw_snooze", "tw_stop_run"]
    assert panel_buttons["tw_stop_run"]["confirm"]["title"]["text"] == "Stop this run?"
    # Stop from the panel (an ephemeral message): the stop is requested, the panel replaced by the outcome
    click(bot, slack_api, "tw_stop_run", json.loads(panel_buttons["tw_stop_run"]["value"]), ephemeral=True)
    (_, done) = responses(slack_api, 2)[1]
    assert done["text"] == f"Stop of exp01 requested by <@{ADMIN}>; the outcome goes to the run's thread."
    assert done["replace_original"] in (True, "true")
    (requested,) = events_of(store, "exp01", t.STOP_REQUESTED)
    assert requested.data["user"] == ADMIN and requested.data["reason"] == "stopped from Slack"
    # the run stops; the anomaly message's Stop button, clicked late, changes nothing
    store.append([event(t.STOP_DONE, "exp01", 20)])
    click(bot, slack_api, "tw_stop_run", json.loads(on_message["tw_stop_run"]["value"]))
    (_, late) = responses(slack_api, 3)[2]
    assert late["text"] == "exp01 has already stopped; nothing was done." and late["response_type"] == "ephemeral"
    assert len(events_of(store, "exp01", t.STOP_REQUESTED)) == 1
    # and its Status offers no Stop any more
    click(bot, slack_api, "tw_status", {"run": "exp01"})
    (_, after) = responses(slack_api, 4)[3]
    assert after["text"].startswith("*exp01@gpu1* is stopped")
    blocks = json.loads(after["blocks"]) if isinstance(after["blocks"], str) else after["blocks"]
    assert list(buttons_of(blocks)) == ["tw_snooze"]


def test_the_run_actions_shortcut_works_on_any_message_of_a_runs_thread(bot, slack_api, store):
    store.append([anomaly("exp01", 6)])
    (parent,) = wait_for(lambda: [m for m in slack_api.messages if m.text.startswith("ANOMALY exp01")], what="post")
    # on a person's reply in the thread (no metadata): the run is read from the thread's parent
    reply = {"type": "message", "user": VIEWER, "ts": "1900000000.000200", "thread_ts": parent.ts, "text": "why?"}
    shortcut(bot, slack_api, reply)
    (_, panel) = responses(slack_api, 1)[0]
    assert panel["text"].startswith("*exp01@gpu1* is running") and panel["response_type"] == "ephemeral"
    assert any(name == "conversations.replies" and p.get("ts") == parent.ts for name, p in slack_api.calls)
    (received,) = [e for e in events_of(store, SYSTEM_RUN, t.COMMAND_RECEIVED) if e.data["via"] == "tw_run_actions"]
    assert received.data["user"] == ADMIN
    # on the bot's own message: its metadata names the run (audited in the run's log); Snooze from the panel
    shortcut(bot, slack_api, {"type": "message", "ts": parent.ts, "text": parent.text, "metadata": parent.metadata})
    (_, panel) = responses(slack_api, 2)[1]
    blocks = json.loads(panel["blocks"]) if isinstance(panel["blocks"], str) else panel["blocks"]
    snooze = buttons_of(blocks)["tw_snooze"]
    assert snooze["text"]["text"] == "Snooze 1h"
    assert [e.data["via"] for e in events_of(store, "exp01", t.COMMAND_RECEIVED)] == ["tw_run_actions"]
    click(bot, slack_api, "tw_snooze", json.loads(snooze["value"]), ephemeral=True)
    (_, snoozed) = responses(slack_api, 3)[2]
    assert snoozed["text"].startswith(f"<@{ADMIN}> snoozed all anomalies of exp01 until")
    assert snoozed["response_type"] == "in_channel" and snoozed["replace_original"] in (False, "false")
    (snooze_set,) = events_of(store, "exp01", t.SNOOZE_SET)
    assert snooze_set.data["rule"] is None and snooze_set.data["user"] == ADMIN
    # a stranger is denied, as /tw status would deny them
    shortcut(bot, slack_api, reply, user=STRANGER)
    (_, denied) = responses(slack_api, 4)[3]
    assert denied["text"].startswith("Sorry, you are not allowed to use /tw status here.")


def test_the_shortcut_outside_a_runs_thread_says_how_to_get_the_status(bot, slack_api):
    shortcut(bot, slack_api, {"type": "message", "user": VIEWER, "ts": "1900000001.000100", "text": "hello"})
    (_, reply) = responses(slack_api, 1)[0]
    assert reply["text"].startswith("This message is not in a run's thread") and "/tw status" in reply["text"]


def test_status_shows_nan_not_a_row_of_marks(bot, slack_api, store):
    store.append([nan_metric("exp02", i) for i in range(1, 13)])
    _, body = command(bot, slack_api, "tw", "status exp02")
    line = body["text"].splitlines()[1]
    assert " loss nan gpu " in line and "!" not in body["text"]


def test_the_bot_starts_without_bolts_token_warning(tmp_path, redis_server, slack_api, store):
    with bot_process(tmp_path, redis_server.url, slack_api) as bot:
        _, body = command(bot.url, slack_api, "tw", "status")
        assert body["text"] == "No active runs."
    log = bot.log.read_text()
    assert "this notifier holds the notifier lease" in log  # the start-up log was read (it logs warnings)
    assert "token` will be unused" not in log

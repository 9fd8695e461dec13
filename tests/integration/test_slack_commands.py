"""Slash commands and button clicks as signed HTTP requests to the bot's endpoint on 127.0.0.1."""

import json
import time
import urllib.parse
from dataclasses import replace
from pathlib import Path

import pytest
from trainwarden.bot.config import BotConfig
from trainwarden.bot.launcher import FleetLauncher
from trainwarden.bot.service import SocketModeEndpoint
from trainwarden.bot.stages import SYSTEM_RUN
from trainwarden.core.errors import ConfigError
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.remote.fleet import Experiment, Fleet, Server
from trainwarden.remote.launch import RemoteLauncher
from trainwarden.remote.ssh import SshPool

from tests.conftest import REPO
from tests.helpers import events_of, metric, wait_for
from tests.slack_api import sign
from tests.slack_bot import ADMIN, SECRET, STRANGER, VIEWER, click, command, post, responses, running_bot
from trainwarden import wiring
from trainwarden.settings import Settings

pytestmark = [pytest.mark.redis]


@pytest.fixture
def fleet(tmp_path):
    """One experiment on one server; the validation tests never reach it (launches: tests/remote)."""
    server = Server(name="gpu1", host="127.0.0.1", user="nobody", work_dir=str(tmp_path))
    exp = Experiment(name="demo-exp", server="gpu1", command=("python", "train.py"))
    return Fleet(servers={"gpu1": server, "gpu2": replace(server, name="gpu2")}, experiments={"demo-exp": exp})


@pytest.fixture
def bot(redis_server, slack_api, store, fleet):
    launcher = FleetLauncher(RemoteLauncher(shell=SshPool(), store=store, fleet=fleet, host="ctl", secrets={}))
    with running_bot(redis_server.url, slack_api, fleet=fleet, launcher=launcher) as running:
        store.append([metric("exp01", i, step=i * 10, loss=2.0 - i / 100) for i in range(1, 6)])
        yield running


def test_status_lists_active_runs_one_line_each(bot, slack_api, store):
    status, body = command(bot, slack_api, "status", "")
    assert status == 200 and body["response_type"] == "ephemeral"
    assert body["text"].startswith("exp01@gpu1 running step 50 loss 1.95 ")
    assert "anomalies none" in body["text"]
    status, body = command(bot, slack_api, "status", "exp01", user=VIEWER)
    assert body["text"].startswith("*exp01@gpu1* is running")
    assert "Decisions: none yet" in body["text"]
    (received,) = events_of(store, "exp01", t.COMMAND_RECEIVED)
    assert received.data == {"command": "/status", "user": VIEWER, "channel": "C1", "via": "slash", "text": "exp01"}


def test_status_shows_a_plan_under_way(bot, slack_api, store):
    def plan_event(event_type, seq, **data):
        return make_event(event_type, run="plan-sweep1", host="ctl", producer="plan/ctl", seq=seq, data=data)

    store.append([
        plan_event(t.PLAN_STARTED, 1, plan="sweep1", experiments=["e1", "e2", "e3"]),
        plan_event(t.PLAN_STEP, 2, plan="sweep1", experiment="e1", state="finished"),
        plan_event(t.PLAN_STEP, 3, plan="sweep1", experiment="e2", state="running", gpus=[0]),
    ])  # fmt: skip
    _, body = command(bot, slack_api, "status", "")
    assert "plan sweep1: e1 finished · e2 running · e3 pending" in body["text"].splitlines()
    store.append([plan_event(t.PLAN_FINISHED, 4, plan="sweep1")])
    _, body = command(bot, slack_api, "status", "")
    assert "plan sweep1" not in body["text"]


def test_forged_or_stale_requests_are_refused_401(bot, slack_api, store):
    body = urllib.parse.urlencode({"command": "/stop", "text": "exp01", "user_id": ADMIN, "channel_id": "C1"})
    forged = sign(body, "not-the-secret")
    assert post(bot, body, headers=forged)[0] == 401
    stale = sign(body, SECRET, timestamp=int(time.time()) - 600)
    assert post(bot, body, headers=stale)[0] == 401
    assert post(bot, body, headers={"Content-Type": "application/x-www-form-urlencoded"})[0] == 401
    assert events_of(store, "exp01", t.COMMAND_RECEIVED) == []  # nothing reached the bot's code
    assert events_of(store, "exp01", t.STOP_REQUESTED) == []


def test_unauthorized_user_is_denied_and_audited(bot, slack_api, store):
    status, body = command(bot, slack_api, "stop", "exp01 because", user=STRANGER)
    assert status == 200 and body["response_type"] == "ephemeral"
    assert body["text"].startswith("Sorry, you are not allowed to use /stop here.")
    (denied,) = events_of(store, "exp01", t.COMMAND_DENIED)
    assert denied.data["user"] == STRANGER and denied.data["text"] == "exp01 because"
    # the right user in the wrong channel is denied too
    _, body = command(bot, slack_api, "stop", "exp01", channel="COTHER")
    assert body["text"].startswith("Sorry")
    # and a button click by a stranger
    click(bot, slack_api, "tw_stop_run", {"run": "exp01", "reason": "x"}, user=STRANGER)
    (_, reply) = responses(slack_api, 1)[0]
    assert reply["text"].startswith("Sorry") and reply["response_type"] == "ephemeral"
    assert len(events_of(store, "exp01", t.COMMAND_DENIED)) == 3
    assert events_of(store, "exp01", t.STOP_REQUESTED) == []


def test_stop_asks_for_confirmation_then_requests_the_stop(bot, slack_api, store):
    # a reason holding a secret is refused, and the secret is not echoed back
    _, body = command(bot, slack_api, "stop", "exp01 lr too high, token=abc123secret")
    assert body["text"].startswith("Refused, nothing was run: that looks like a secret")
    assert "abc123secret" not in json.dumps(body)
    _, body = command(bot, slack_api, "stop", "exp01 lr too high")
    assert body["text"] == "Stop exp01? Reason: lr too high"
    button = body["blocks"][1]["elements"][0]
    assert events_of(store, "exp01", t.STOP_REQUESTED) == []  # nothing before the click
    click(bot, slack_api, button["action_id"], json.loads(button["value"]), ephemeral=True)
    (_, reply) = responses(slack_api, 1)[0]
    assert reply["text"] == f"Stop of exp01 requested by <@{ADMIN}>; the outcome goes to the run's thread."
    assert reply["replace_original"] in (True, "true")
    (requested,) = events_of(store, "exp01", t.STOP_REQUESTED)
    assert requested.data["user"] == ADMIN and requested.data["reason"] == "lr too high"
    assert "abc123secret" not in json.dumps([e.data for e in events_of(store, "exp01")])


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("stop", "exp1", "Unknown run 'exp1'. Did you mean exp01?"),
        ("launch", "demo-exp; touch pwned", "Refused, nothing was run: it contains the characters ;"),
        ("launch", "demo-exp $(touch pwned)", "Refused, nothing was run: it contains the characters $ ( )"),
        ("launch", "dem-exp", "Unknown experiment 'dem-exp'. Did you mean demo-exp?"),
        ("launch", "demo-exp gpu9", "Unknown server 'gpu9'. Did you mean gpu2, gpu1?"),  # closest first
        ("launch", "demo-exp gpu2", "Refused, nothing was run: demo-exp runs on gpu1 (its experiment file says so)"),
        ("stop", "exp01 " + "x" * 200, "Refused, nothing was run: the text is 206 characters long; the limit is 200"),
        ("stop", "exp01 a\x1b[31mred", "Refused, nothing was run: it contains control characters"),
        ("snooze", "exp01 loss 5 minutes", "Usage: /tw snooze RUN [RULE] DURATION"),
        ("snooze", "exp01 loss 5x", "'5x' is not a duration"),
    ],
)
def test_bad_input_is_refused_and_nothing_runs(bot, slack_api, store, tmp_path, name, text, expected):
    status, body = command(bot, slack_api, name, text)
    assert status == 200 and body["response_type"] == "ephemeral"
    assert body["text"].startswith(expected)
    assert not list(Path(REPO).glob("pwned*")) and not list(tmp_path.glob("pwned*"))
    assert events_of(store, "demo-exp", t.RUN_LAUNCHED) == []
    assert events_of(store, "exp01", t.STOP_REQUESTED) == []


def test_snooze_appends_an_event_and_says_when_it_ends(bot, slack_api, store):
    _, body = command(bot, slack_api, "snooze", "exp01 loss-spike 2h")
    assert body["response_type"] == "in_channel"
    assert body["text"].startswith(f"<@{ADMIN}> snoozed loss-spike on exp01 until ")
    assert body["text"].endswith("(2h).") or body["text"].endswith("(1h59m).")
    (snooze,) = events_of(store, "exp01", t.SNOOZE_SET)
    assert snooze.data["rule"] == "loss-spike" and snooze.data["user"] == ADMIN
    assert snooze.data["until"] == pytest.approx(time.time() + 7200, abs=60)


def test_guarded_stop_buttons(bot, slack_api, store):
    decision = make_event(t.DECISION, run="exp01", host="w", producer="eval/exp01", seq=1,
                          data={"decision": "STOP", "rule": "val-loss-rising", "reason": "val loss rose 3 evals",
                                "confirm_s": 300, "run_host": "gpu1"})  # fmt: skip
    store.append([decision])
    guard = wait_for(lambda: [m for m in slack_api.messages if m.text.startswith("Stopping exp01")], what="guard")[0]
    keep = next(e for b in guard.blocks if b["type"] == "actions" for e in b["elements"]
                if e["action_id"] == "tw_keep_running")  # fmt: skip
    click(bot, slack_api, "tw_keep_running", json.loads(keep["value"]))
    (_, reply) = responses(slack_api, 1)[0]
    assert reply["text"].startswith(f"<@{ADMIN}> kept exp01 running; val-loss-rising is snoozed until")
    (cancelled,) = events_of(store, "exp01", t.STOP_CANCELLED)
    assert cancelled.data["decision"] == decision.id and cancelled.data["user"] == ADMIN
    (snooze,) = events_of(store, "exp01", t.SNOOZE_SET)
    assert snooze.data["rule"] == "val-loss-rising"
    wait_for(lambda: guard.updates and guard.updates[-1].endswith(f"[kept running by <@{ADMIN}>]"), what="update")
    # the other button, pressed late, changes nothing
    click(bot, slack_api, "tw_stop_now", json.loads(keep["value"]))
    (_, late) = responses(slack_api, 2)[1]
    assert late["text"] == "The stop of exp01 was already decided; nothing changed."
    assert events_of(store, "exp01", t.STOP_REQUESTED) == []


def test_stop_now_requests_the_stop_for_the_decision(bot, slack_api, store):
    decision = make_event(t.DECISION, run="exp01", host="w", producer="eval/exp01", seq=1,
                          data={"decision": "STOP", "rule": "r", "reason": "x", "confirm_s": 300})  # fmt: skip
    store.append([decision])
    click(bot, slack_api, "tw_stop_now", {"run": "exp01", "rule": "r", "decision": decision.id})
    responses(slack_api, 1)
    (requested,) = events_of(store, "exp01", t.STOP_REQUESTED)
    assert requested.data["decision"] == decision.id and requested.data["user"] == ADMIN


def test_commands_without_a_run_are_audited_in_the_system_log(bot, slack_api, store):
    command(bot, slack_api, "status", "", user=VIEWER)
    (received,) = events_of(store, SYSTEM_RUN, t.COMMAND_RECEIVED)
    assert received.data["user"] == VIEWER and received.data["command"] == "/status"


def test_socket_mode_when_an_app_token_is_set_and_http_needs_a_signing_secret(redis_server, slack_api):
    settings = Settings(redis_url=redis_server.url, host="h", slack=BotConfig(channel="C1"))
    env = {"SLACK_BOT_TOKEN": "xoxb-test-token", "SLACK_API_URL": slack_api.url}
    built = wiring.slack_bot(settings, {**env, "SLACK_APP_TOKEN": "xapp-test-token"})
    assert isinstance(built.endpoint, SocketModeEndpoint)
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET"):
        wiring.slack_bot(settings, env)
    with pytest.raises(ConfigError, match=r"slack\.channel"):
        wiring.slack_bot(Settings(redis_url=redis_server.url), {**env, "SLACK_SIGNING_SECRET": SECRET})

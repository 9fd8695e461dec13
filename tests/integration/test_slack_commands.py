"""Slash commands and button clicks as signed HTTP requests to the bot's endpoint on 127.0.0.1."""

import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from bot.config import Allow, BotConfig, Experiment
from bot.service import SocketModeEndpoint
from bot.stages import SYSTEM_RUN
from events import types as t
from events.envelope import make_event
from tests.conftest import REPO
from tests.helpers import events_of, metric, wait_for
from tests.slack_api import sign
from trainwarden import wiring
from trainwarden.errors import ConfigError
from trainwarden.settings import Settings
from workers.transport import LocalTmuxController, StopTarget

pytestmark = [pytest.mark.redis]

SECRET = "test-signing-secret-0123"
ADMIN, VIEWER, STRANGER = "UADMIN", "UVIEWER", "USTRANGER"


@pytest.fixture
def bot(redis_server, slack_api, store, tmux_socket, tmp_path):
    experiment = Experiment(name="demo-exp", command=(sys.executable, "-c", "import time; time.sleep(60)"),
                            workdir=tmp_path, log=tmp_path / "demo-exp.log", total_steps=1000)  # fmt: skip
    allow = {"status": Allow(users=frozenset({ADMIN, VIEWER})), "launch": Allow(users=frozenset({ADMIN})),
             "stop": Allow(users=frozenset({ADMIN}), channels=frozenset({"C1"})),
             "snooze": Allow(users=frozenset({ADMIN}))}  # fmt: skip
    config = BotConfig(channel="C1", allow=allow, experiments=(experiment,), rate_per_s=1000, burst=1000,
                       http_host="127.0.0.1", http_port=0)  # fmt: skip
    settings = Settings(redis_url=redis_server.url, host="testhost", slack=config, reclaim_idle_s=1)
    env = {"SLACK_BOT_TOKEN": "xoxb-test-token", "SLACK_SIGNING_SECRET": SECRET, "SLACK_API_URL": slack_api.url}
    slack_bot = wiring.slack_bot(settings, env, tmux_socket=tmux_socket)
    slack_bot.notifier.reader.ensure_group()
    stop = threading.Event()
    thread = threading.Thread(target=slack_bot.run, kwargs={"stop": stop}, daemon=True)
    thread.start()
    store.append([metric("exp01", i, step=i * 10, loss=2.0 - i / 100) for i in range(1, 6)])
    yield slack_bot
    stop.set()
    thread.join(timeout=10)


def post(bot, body, *, headers=None):
    request = urllib.request.Request(bot.endpoint.url, data=body.encode(), headers=headers or sign(body, SECRET))
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read().decode()
            return response.status, (json.loads(raw) if raw else {})
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def command(bot, slack_api, name, text, *, user=ADMIN, channel="C1"):
    body = urllib.parse.urlencode({"token": "x", "team_id": "T1", "channel_id": channel, "user_id": user,
                                   "command": f"/{name}", "text": text, "response_url": slack_api.response_url(),
                                   "trigger_id": "t1", "api_app_id": "A1"})  # fmt: skip
    return post(bot, body)


def click(bot, slack_api, action_id, value, *, user=ADMIN, ephemeral=False):
    payload = {"type": "block_actions", "user": {"id": user}, "channel": {"id": "C1"}, "team": {"id": "T1"},
               "api_app_id": "A1", "token": "x", "trigger_id": "t1", "response_url": slack_api.response_url("click"),
               "container": {"type": "message", "is_ephemeral": ephemeral},
               "actions": [{"action_id": action_id, "block_id": "b1", "type": "button",
                            "value": json.dumps(value)}]}  # fmt: skip
    return post(bot, urllib.parse.urlencode({"payload": json.dumps(payload)}))


def responses(slack_api, n):
    return wait_for(lambda: len(slack_api.responses) >= n and slack_api.responses, what=f"{n} response_url posts")


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
    _, body = command(bot, slack_api, "stop", "exp01 lr too high, token=abc123secret")
    assert body["text"] == "Stop exp01? Reason: lr too high, token=***"
    button = body["blocks"][1]["elements"][0]
    assert events_of(store, "exp01", t.STOP_REQUESTED) == []  # nothing before the click
    click(bot, slack_api, button["action_id"], json.loads(button["value"]), ephemeral=True)
    (_, reply) = responses(slack_api, 1)[0]
    assert reply["text"] == f"Stop of exp01 requested by <@{ADMIN}>; the outcome goes to the run's thread."
    assert reply["replace_original"] in (True, "true")
    (requested,) = events_of(store, "exp01", t.STOP_REQUESTED)
    assert requested.data["user"] == ADMIN and requested.data["reason"] == "lr too high, token=***"
    assert "abc123secret" not in json.dumps([e.data for e in events_of(store, "exp01")])


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("stop", "exp1", "Unknown run 'exp1'. Did you mean exp01?"),
        ("launch", "demo-exp; touch pwned", "Refused, nothing was run: it contains the characters ;"),
        ("launch", "demo-exp $(touch pwned)", "Refused, nothing was run: it contains the characters $ ( )"),
        ("launch", "dem-exp", "Unknown experiment 'dem-exp'. Did you mean demo-exp?"),
        ("launch", "demo-exp gpu9", "Unknown server 'gpu9'. Known servers: testhost."),
        ("stop", "exp01 " + "x" * 200, "Refused, nothing was run: the text is 206 characters long; the limit is 200"),
        ("stop", "exp01 a\x1b[31mred", "Refused, nothing was run: it contains control characters"),
        ("snooze", "exp01 loss 5 minutes", "Usage: /snooze RUN [RULE] DURATION"),
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


@pytest.mark.tmux
def test_launch_acks_then_starts_the_run_and_reports_in_its_thread(bot, slack_api, store, tmux_socket):
    _, body = command(bot, slack_api, "launch", "demo-exp")
    assert body["response_type"] == "ephemeral"
    assert body["text"] == "Launching demo-exp on testhost; the outcome goes to the run's thread."
    (launched,) = wait_for(lambda: events_of(store, "demo-exp", t.RUN_LAUNCHED), what="run.launched")
    assert launched.data["config"]["requested_by"] == ADMIN
    target = StopTarget.from_launch("demo-exp", launched.data, default_host="testhost")
    assert LocalTmuxController().is_running(target)
    message = wait_for(lambda: [m for m in slack_api.messages if m.text.startswith("LAUNCHED")], what="post")[0]
    assert message.text.startswith(f"LAUNCHED demo-exp@testhost by <@{ADMIN}>: tmux session train-demo-exp")
    # a second launch of the same experiment fails (its session exists) and says so in the thread
    command(bot, slack_api, "launch", "demo-exp")
    failed = wait_for(lambda: [m for m in slack_api.messages if m.text.startswith("LAUNCH FAILED")], what="post")[0]
    assert failed.thread_ts == message.ts
    assert "could not start session train-demo-exp" in failed.text


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

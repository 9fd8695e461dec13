"""Slack's HTTP requests at the edges, against the real `trainwarden bot` process (HTTP mode):
a timestamp, a Content-Length or a payload that is not what Slack sends, a replayed signed click."""

import json
import socket
import urllib.parse
import urllib.request

import pytest
from trainwarden.events import types as t

from tests.helpers import events_of, metric, wait_for
from tests.slack_api import sign
from tests.slack_bot import ADMIN, SECRET, bot_process, post, trigger_id

pytestmark = [pytest.mark.redis]


@pytest.fixture
def bot(store, slack_api, redis_server, tmp_path):
    store.append([metric("exp01", i, step=i, loss=2.0) for i in range(1, 4)])
    with bot_process(tmp_path, redis_server.url, slack_api) as running:
        yield running


def stop_click(api) -> str:
    payload = {"type": "block_actions", "user": {"id": ADMIN}, "channel": {"id": "C1"}, "team": {"id": "T1"},
               "api_app_id": "A1", "token": "x", "trigger_id": trigger_id(), "response_url": api.response_url("c"),
               "container": {"type": "message", "is_ephemeral": False},
               "actions": [{"action_id": "tw_stop_run", "block_id": "b1", "type": "button",
                            "value": json.dumps({"run": "exp01", "reason": "loss=nan"})}]}  # fmt: skip
    return urllib.parse.urlencode({"payload": json.dumps(payload)})


def raw_request(url: str, head: str, body: bytes) -> bytes:
    """Send bytes as they are (no client fixes the headers) and read the answer until the server closes."""
    parsed = urllib.parse.urlparse(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=5) as s:
        s.sendall(head.encode() + b"\r\n\r\n" + body)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return answer


def test_malformed_requests_get_an_answer_and_the_bot_goes_on(bot):
    # a timestamp that is not a number: 401 (was 500)
    body = urllib.parse.urlencode({"command": "/status", "text": "", "user_id": ADMIN, "channel_id": "C1"})
    for stamp in ("soon", "1.7e9"):
        assert post(bot.url, body, headers={**sign(body, SECRET), "X-Slack-Request-Timestamp": stamp})[0] == 401
    # a Content-Length that is not a number: 400 (was: connection dropped, no answer)
    head = "POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
    for length in ("twelve", "-5"):
        answer = raw_request(bot.url, head + f"Content-Length: {length}", b"command=/status")
        assert b" 400 " in answer.split(b"\r\n", 1)[0], answer
    # a payload that is not a JSON object: 400 (was: connection dropped, no answer)
    for payload in ("{bad", "[1, 2]", '"text"'):
        body = urllib.parse.urlencode({"payload": payload})
        assert post(bot.url, body, headers=sign(body, SECRET))[0] == 400, payload
    with urllib.request.urlopen(bot.url.replace("/slack/events", "/healthz"), timeout=5) as still:
        assert still.status == 200
    assert bot.proc.poll() is None


def test_a_replayed_signed_click_is_refused_and_stops_nothing_twice(bot, store, slack_api):
    body = stop_click(slack_api)
    headers = sign(body, SECRET)
    assert post(bot.url, body, headers=headers)[0] == 200
    wait_for(lambda: events_of(store, "exp01", t.STOP_REQUESTED), what="the stop request")
    assert post(bot.url, body, headers=headers)[0] == 401  # the same bytes again, within the 5 minutes
    fresh = stop_click(slack_api)  # a new click (its own trigger_id) is a new request
    assert post(bot.url, fresh, headers=sign(fresh, SECRET))[0] == 200
    wait_for(lambda: len(events_of(store, "exp01", t.STOP_REQUESTED)) == 2, what="the second click's stop request")
    assert len(events_of(store, "exp01", t.STOP_REQUESTED)) == 2

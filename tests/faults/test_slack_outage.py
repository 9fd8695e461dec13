"""A Slack outage is two lines in the bot's log, not one per try: when it starts, and when it ends with its
duration. A 2-minute outage logged 111 slack_sdk ERROR lines (one per try that could not reach Slack) beside
the sink's and the notifier's warnings per try.

The real `trainwarden bot` process posting to the local Slack API server (tests/slack_api.py), which stops
listening (connection refused) until the sink has been refused MAX_ATTEMPTS - 1 times in a row."""

import re

import pytest
from trainwarden.bot.slack_sink import BACKOFF_S, MAX_ATTEMPTS
from trainwarden.events.heartbeat import read_beat

from tests.faults.test_slack_refusal import Worker, posted
from tests.helpers import wait_for
from tests.slack_bot import bot_process

pytestmark = [pytest.mark.redis]


def test_a_slack_outage_is_one_line_when_it_starts_and_one_with_its_duration(
    store, r, slack_api, redis_server, tmp_path
):
    worker = Worker()
    with bot_process(tmp_path, redis_server.url, slack_api, heartbeat_interval_s=0.25) as bot:
        store.append_one(worker.nan("exp01"))
        posted(slack_api, "exp01@gpu1")
        slack_api.down()
        store.append_one(worker.nan("exp02"))

        # the sink's last pause of a round: MAX_ATTEMPTS - 1 tries refused (the notifier's heartbeat says it)
        # (chat.postMessage's, or that of the conversations.history it reads first to see if a try had landed)
        last_pause = f" in {BACKOFF_S * 2 ** (MAX_ATTEMPTS - 2):.1f} s after URLError"

        def round_done() -> bool:
            beat = read_beat(r, store.keys, "notifier@bothost")
            return beat is not None and (beat.notice or "").startswith("retrying ") and last_pause in beat.notice

        wait_for(round_done, timeout=60, what=f"{MAX_ATTEMPTS - 1} refused tries")
        slack_api.up()
        posted(slack_api, "exp02@gpu1")
        log = bot.log.read_text()
    lines = log.splitlines()
    assert [line for line in lines if "ERROR" in line] == [], log[-3000:]
    started = [line for line in lines if "Slack does not answer" in line]
    ended = [line for line in lines if re.search(r"notifier: Slack reachable again after \d+\.\ds", line)]
    assert len(started) == 1 and "chat.postMessage" in started[0] and "refused" in started[0], log[-3000:]
    assert len(ended) == 1, log[-3000:]
    assert not [line for line in lines if "retrying in" in line or "stays pending" in line], log[-3000:]

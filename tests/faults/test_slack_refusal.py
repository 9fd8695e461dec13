"""A message Slack refuses costs at most that message: the real `trainwarden bot` (HTTP mode) posting
to the local Slack API server, which refuses what real Slack refuses (section over 3,000 characters)
and, on demand, any one message."""

import pytest
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.feed import NOTIFY_GROUP
from trainwarden.events.keys import Keys

from tests.helpers import events_of, wait_for
from tests.slack_bot import bot_process

pytestmark = [pytest.mark.redis]

LONG_ERROR = "ssh: remote command failed: " + "x" * 3_200


class Worker:
    """The events the workers and the bot's launcher write, with increasing seqs."""

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, event_type, run, **data):
        self.seq += 1
        return make_event(event_type, run=run, host="worker", producer=f"eval/{run}", seq=self.seq,
                          data={"run_host": "gpu1", **data})  # fmt: skip

    def launch_failed(self, run):
        return self(t.LAUNCH_FAILED, run, by="slack", server="gpu1", user="UADMIN", error=LONG_ERROR)

    def nan(self, run):
        return self(t.ANOMALY_OPENED, run, rule="loss-nonfinite", severity="critical", reason="loss=nan at step 210",
                    values={"step": 210}, remedy=None, decision="STOP", trigger="x", policy="p")  # fmt: skip


def posted(api, needle):
    return wait_for(lambda: [m for m in api.messages if needle in m.text], timeout=15, what=f"a post with {needle!r}")


def feed_pending(r) -> int:
    return int(r.xpending(Keys().feed(), NOTIFY_GROUP)["pending"])


def test_a_long_message_is_fitted_a_refused_one_is_recorded_and_neither_holds_up_the_next(
    store, r, slack_api, redis_server, tmp_path
):
    worker = Worker()
    with bot_process(tmp_path, redis_server.url, slack_api) as bot:
        # A 3,200-character launch error: cut to fit a section (Slack refused it, and the notifier died).
        store.append_one(worker.launch_failed("exp01"))
        (launch,) = posted(slack_api, "LAUNCH FAILED exp01")
        section = launch.blocks[0]["text"]["text"]
        assert len(section) <= 3000 and section.startswith("LAUNCH FAILED exp01@gpu1")
        assert "more characters cut" in section
        store.append_one(worker.nan("exp01"))
        posted(slack_api, "exp01@gpu1: loss=nan at step 210")
        assert slack_api.refused == []  # fitted before sending: Slack had nothing to refuse
        # Refused once: recorded, then posted as its text alone.
        slack_api.fail("chat.postMessage", "refuse:invalid_blocks")
        store.append_one(worker.nan("exp02"))
        (plain,) = posted(slack_api, "exp02@gpu1")
        assert plain.blocks == [] and plain.text.startswith("ANOMALY exp02@gpu1: loss=nan at step 210")
        (failed,) = wait_for(lambda: events_of(store, "exp02", t.NOTIFICATION_FAILED), what="notification.failed")
        assert failed.data["error"] == "invalid_blocks" and failed.data["attempt"] == "full"
        # Refused twice: given up (recorded), and the next message goes out all the same.
        slack_api.fail("chat.postMessage", "refuse:invalid_blocks", "refuse:invalid_blocks")
        store.append_one(worker.nan("exp03"))
        wait_for(lambda: len(events_of(store, "exp03", t.NOTIFICATION_FAILED)) == 2, what="two notification.failed")
        store.append_one(worker.nan("exp04"))
        posted(slack_api, "exp04@gpu1")
        assert not [m for m in slack_api.messages if "exp03" in m.text]
        assert [e.data["attempt"] for e in events_of(store, "exp03", t.NOTIFICATION_FAILED)] == ["full", "plain"]
        wait_for(lambda: feed_pending(r) == 0, what="every feed entry acknowledged")  # nothing redelivered forever
        assert bot.proc.poll() is None
    assert "Exception in thread" not in bot.log.read_text()


def test_a_notifier_loop_that_dies_exits_the_process_non_zero(store, r, slack_api, redis_server, tmp_path):
    worker = Worker()
    with bot_process(tmp_path, redis_server.url, slack_api) as bot:
        # A checkpoint no notifier wrote (hand-edited, or a bug): reading it raises, which nothing expects.
        r.hset(Keys().notify("exp05"), mapping={"after": "", "state": "{not json"})
        store.append_one(worker.nan("exp05"))
        code = wait_for(bot.proc.poll, timeout=20, what="the bot to exit")
        assert code == 70
    log = bot.log.read_text()
    assert log.count("the notifier loop died") == 1 and log.count("Traceback") == 1

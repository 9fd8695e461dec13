"""The Slack sink against a local Web API server: rate limits, server errors, dropped connections."""

import pytest
from slack_sdk import WebClient
from trainwarden.bot.errors import SlackRejected, SlackUnavailable
from trainwarden.bot.sink import Message
from trainwarden.bot.slack_sink import RateLimiter, SlackSink


def make_sink(api, *, sleeps=None, max_attempts=4):
    client = WebClient(token="xoxb-test-token", base_url=api.url, retry_handlers=[])
    now = [0.0]

    def sleep(seconds):  # a clock the sink's waits move, so Retry-After costs the test no time
        now[0] += seconds
        if sleeps is not None:
            sleeps.append(seconds)

    limiter = RateLimiter(rate_per_s=1000, burst=1000, clock=lambda: now[0])
    return SlackSink(client=client, limiter=limiter, max_attempts=max_attempts, backoff_s=0.01, sleep=sleep)


def message(key="eval/exp01:1", thread_ts=None):
    return Message(key=key, run="exp01", channel="C1", text="ANOMALY exp01@gpu1: loss=nan", thread_ts=thread_ts)


def test_posts_with_metadata_carrying_the_key(slack_api):
    ts = make_sink(slack_api).post(message())
    (posted,) = slack_api.messages
    assert posted.ts == ts
    assert posted.key == "eval/exp01:1"
    assert posted.metadata["event_type"] == "trainwarden_notification"


def test_429_waits_retry_after_and_posts_once(slack_api):
    slack_api.retry_after = 7
    slack_api.fail("chat.postMessage", "429", "429")
    sleeps = []
    make_sink(slack_api, sleeps=sleeps).post(message())
    assert len(slack_api.messages) == 1
    assert slack_api.count("chat.postMessage:429") == 2
    assert sum(sleeps) >= 14  # waited Retry-After before each new try
    assert slack_api.count("conversations.history") == 0  # a 429 is unambiguous: no reconciliation


@pytest.mark.parametrize("fault", ["500", "reset"])
def test_server_error_or_dropped_connection_is_retried_and_posted_once(slack_api, fault):
    slack_api.fail("chat.postMessage", fault, fault)
    sink = make_sink(slack_api)
    sink.post(message())
    assert len(slack_api.messages) == 1
    assert sink.retries == 2
    assert slack_api.count("conversations.history") >= 1  # looked before posting again


def test_post_that_landed_before_the_connection_dropped_is_not_repeated(slack_api):
    slack_api.fail("chat.postMessage", "reset-after-post")
    ts = make_sink(slack_api).post(message())
    assert len(slack_api.messages) == 1
    assert slack_api.messages[0].ts == ts


def test_reply_that_landed_is_found_in_its_thread(slack_api):
    sink = make_sink(slack_api)
    parent = sink.post(message(key="k:1"))
    slack_api.fail("chat.postMessage", "reset-after-post")
    ts = sink.post(message(key="k:2", thread_ts=parent))
    assert [m.key for m in slack_api.messages] == ["k:1", "k:2"]
    assert slack_api.messages[1].ts == ts
    assert slack_api.count("conversations.replies") == 1


def test_gives_up_for_now_after_max_attempts(slack_api):
    slack_api.fail("chat.postMessage", *["500"] * 10)
    with pytest.raises(SlackUnavailable, match="failed 3 times"):
        make_sink(slack_api, max_attempts=3).post(message())


def test_a_refusal_says_what_to_fix(slack_api):
    client = WebClient(token=None, base_url=slack_api.url, retry_handlers=[])
    sink = SlackSink(client=client, limiter=RateLimiter(rate_per_s=10, burst=10))
    with pytest.raises(SlackRejected, match=r"not_authed.*invited to the channel"):
        sink.post(message())


def test_rate_limiter_spreads_posts_per_channel():
    now = [0.0]
    limiter = RateLimiter(rate_per_s=1.0, burst=2, clock=lambda: now[0])
    assert limiter.delay("C1") == 0 and limiter.delay("C1") == 0
    assert limiter.delay("C1") == pytest.approx(1.0)
    assert limiter.delay("C2") == 0  # channels are independent
    now[0] = 1.0
    assert limiter.delay("C1") == 0
    limiter.pause("C1", 30)
    assert limiter.delay("C1") == pytest.approx(30)

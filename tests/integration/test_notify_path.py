"""The notify path on a real Redis and the local Slack Web API: each message worded once, a route with
`continue` posting into two channels exactly once each, and the notifier's state repository."""

import pytest
from redis.client import Pipeline
from trainwarden.bot import render, stages
from trainwarden.bot.config import Route
from trainwarden.bot.notifier import Notifier
from trainwarden.bot.stages import Pipeline as NoiseControl
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.lease import Unfenced
from trainwarden.events.notify_state import Checkpoint, NotifyStateRepo

from tests.slack_api import sink_for

pytestmark = pytest.mark.redis


def notifier(store, api, routes=()):
    n = Notifier(store=store, sink=sink_for(api), consumer="n1", channel="C1", host="bot",
                 pipeline=NoiseControl(flap_threshold=3, flap_window_s=3600.0), routes=routes)  # fmt: skip
    n.reader.ensure_group()
    return n


def events(run):
    seq = iter(range(1, 100))

    def ev(event_type, **data):
        n = next(seq)
        return make_event(event_type, run=run, host="w", producer=f"eval/{run}", seq=n, ts=1000.0 + n,
                          data={"run_host": "gpu1", **data})  # fmt: skip

    return [
        ev(t.ANOMALY_OPENED, rule="a", reason="loss=9", severity="warning", values={"loss": 9.0}),
        ev(t.ANOMALY_OPENED, rule="a", reason="loss=9", severity="warning", values={"loss": 9.0}),  # duplicate
        ev(t.SNOOZE_SET, rule="b", until=1e12),
        ev(t.ANOMALY_OPENED, rule="b", reason="gpu idle", severity="warning", values={"gpu": 0.0}),  # snoozed
        ev(t.ANOMALY_RESOLVED, rule="a"),
        ev(t.DECISION, decision="STOP", rule="c", reason="loss=nan", values={"loss": float("nan")}),
        ev(t.STOP_DONE, detail="killed tmux session"),
        ev(t.ANOMALY_OPENED, rule="d", reason="late", severity="warning", values={"loss": 1.0}),  # inhibited
    ]


def drain(n):
    while n.step() > 0:
        pass


def test_each_message_is_worded_once_and_only_if_posted(store, slack_api, monkeypatch):
    worded = []
    real = stages.headline

    def counting(notice):
        worded.append(notice.key)
        return real(notice)

    monkeypatch.setattr(stages, "headline", counting)
    monkeypatch.setattr(render, "headline", counting)
    store.append(events("r1"))
    n = notifier(store, slack_api)
    drain(n)
    posted = [m for m in slack_api.messages if m.channel == "C1"]
    assert [m.text.split()[0] for m in posted] == ["ANOMALY", "RESOLVED", "STOP", "STOPPED"]
    assert len(worded) == len(posted) == len(set(worded))  # once per message; nothing for what was dropped
    assert n.suppressed == {"duplicate": 1, "snoozed": 1, "inhibited": 1}


def test_a_route_with_continue_posts_into_two_channels_once_each(store, slack_api):
    routes = (Route(severity=("critical",), channel="C_ONCALL", continue_=True), Route(run=("r*",), channel="C_RUNS"))
    store.append(events("r2"))
    drain(notifier(store, slack_api, routes))
    drain(notifier(store, slack_api, routes))  # a second notifier over the same feed: nothing twice
    by_channel = {c: [m.text.split()[0] for m in slack_api.messages if m.channel == c] for c in ("C_ONCALL", "C_RUNS")}
    assert by_channel == {"C_ONCALL": ["STOP", "STOPPED"], "C_RUNS": ["ANOMALY", "RESOLVED", "STOP", "STOPPED"]}
    oncall = [m for m in slack_api.messages if m.channel == "C_ONCALL"]
    assert oncall[1].thread_ts == oncall[0].ts  # the run has a thread in each channel
    copies = [m.key for m in slack_api.messages if m.channel == "C_RUNS" and m.text.startswith("STOP")]
    assert copies == [f"{m.key}@C_RUNS" for m in oncall]  # the first channel has the event's key, each copy its own


def test_the_notifier_state_repository_on_redis(store):
    repo = NotifyStateRepo(store.redis, store.keys)
    assert repo.checkpoint("r3") is None and repo.mark("r3", "k1") is None

    def write(pipe: Pipeline) -> None:
        repo.save_checkpoint("r3", Checkpoint(after="5-0", state={"threads": {"C1": "1.0"}}), pipeline=pipe)
        repo.save_mark("r3", "k1", {"state": "sent", "ts": "1.0"}, pipeline=pipe)

    Unfenced(store.redis).transaction(write, what="test")
    assert repo.checkpoint("r3") == Checkpoint(after="5-0", state={"threads": {"C1": "1.0"}})
    assert repo.mark("r3", "k1") == {"state": "sent", "ts": "1.0"}
    assert repo.mark("r3", "k2") is None
    pipe = store.redis.pipeline(transaction=True)  # writes wait for the caller's EXEC
    repo.save_mark("r3", "k2", {"state": "intent"}, pipeline=pipe)
    assert repo.mark("r3", "k2") is None
    pipe.execute()
    assert repo.mark("r3", "k2") == {"state": "intent"}

"""kill -9 of the Slack notifier at each step of a post: after a restart, nothing twice, nothing lost."""

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event

from tests.conftest import kill_at_failpoint, spawn
from tests.helpers import events_of

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def anomalies(run, n):
    return [
        make_event(t.ANOMALY_OPENED, run=run, host="w", producer=f"eval/{run}", seq=i, ts=1000.0 + i,
                   data={"rule": f"rule{i}", "reason": f"reason {i}", "severity": "warning", "run_host": "gpu1"})
        for i in range(1, n + 1)
    ]  # fmt: skip


@pytest.mark.parametrize("failpoint", ["notify-after-intent", "notify-after-post", "notify-after-sent"])
def test_notifier_killed_mid_post(failpoint, store, r, slack_api, redis_server, tmp_path):
    settings = tmp_path / "bot.yaml"
    settings.write_text(yaml.safe_dump({"redis_url": redis_server.url, "host": "bothost",
                                        "workers": {"reclaim_idle_s": 1},
                                        "slack": {"channel": "C1", "rate_per_s": 1000, "burst": 1000}}))  # fmt: skip
    env = {"SLACK_BOT_TOKEN": "xoxb-test-token", "SLACK_API_URL": slack_api.url}
    store.append(anomalies("exp01", 3))
    store.append(anomalies("exp02", 2))

    kill_at_failpoint(settings, tmp_path / "doomed.log", r, failpoint, "bot", "--burst", env=env)
    posted_before = len(slack_api.messages)
    # frozen before the first post, after it, or after exp01's three posts were recorded with its checkpoint
    assert posted_before == {"notify-after-intent": 0, "notify-after-post": 1, "notify-after-sent": 3}[failpoint]

    survivor = spawn(settings, tmp_path / "survivor.log", "bot", "--burst", env=env)
    assert survivor.wait(timeout=60) == 0, (tmp_path / "survivor.log").read_text()

    keys = [m.key for m in slack_api.messages]
    assert sorted(keys) == sorted(f"eval/{run}:{i}" for run, n in (("exp01", 3), ("exp02", 2)) for i in range(1, n + 1))
    assert len(slack_api.parents()) == 2  # one thread per run, replies in it
    for run in ("exp01", "exp02"):
        sent = events_of(store, run, t.NOTIFICATION_SENT)
        assert len(sent) == len({e.data["key"] for e in sent})  # one result per notification
    if failpoint == "notify-after-post":
        reconciled = [e for e in events_of(store, "exp01", t.NOTIFICATION_SENT) if e.data["reconciled"]]
        assert len(reconciled) == 1  # found in the channel by its metadata, not posted again
        assert slack_api.count("conversations.history") >= 1

"""One notifier, enforced: two `trainwarden bot` processes post each message once; the standby takes
over when the holder is killed (kill -9) or paused past its lease (SIGSTOP), and a paused holder that
wakes up posts nothing; a second bot on a taken HTTP port says so in one line.

Real redis-server, real `trainwarden bot` processes (HTTP mode) posting to the local Slack Web API
server (tests/slack_api.py); the workers' events are appended as the workers write them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from trainwarden.events import packfiles
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.store import EventStore

from tests.conftest import cli_argv, spawn, stop_process
from tests.helpers import wait_for
from tests.slack_api import PNG_MAGIC, SlackAPI
from trainwarden.tools.redis_server import free_port

pytestmark = [pytest.mark.redis, pytest.mark.slow]

LEASE_S = 3.0
ENV = {"SLACK_BOT_TOKEN": "xoxb-test-token", "SLACK_SIGNING_SECRET": "test-signing-secret-0123"}
HOLDS = "holds the notifier lease (fencing token"
STANDS_BY = "standing by"


def bot_settings(tmp_path: Path, redis_url: str, name: str, port: int) -> Path:
    path = tmp_path / f"{name}.yaml"
    slack = {"channel": "C1", "rate_per_s": 1000, "burst": 1000, "http_host": "127.0.0.1", "http_port": port,
             "deadman_s": 3600, "lease_s": LEASE_S}  # fmt: skip
    path.write_text(yaml.safe_dump({"redis_url": redis_url, "host": "bothost", "workers": {"reclaim_idle_s": 1},
                                    "slack": slack}))  # fmt: skip
    return path


class Bots:
    """`trainwarden bot` processes, each on its own port and log; stopped at teardown."""

    def __init__(self, tmp_path: Path, redis_url: str, api: SlackAPI) -> None:
        self.tmp_path, self.redis_url, self.api = tmp_path, redis_url, api
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")

    def start(self, name: str) -> subprocess.Popen[bytes]:
        settings = bot_settings(self.tmp_path, self.redis_url, name, free_port())
        env = {**ENV, "SLACK_API_URL": self.api.url}
        self.procs[name] = spawn(settings, self.tmp_path / f"{name}.log", "bot", env=env)
        return self.procs[name]

    def holder(self) -> str | None:
        """The bot whose log says it holds the lease last (after a takeover: the new holder)."""
        holding = [n for n in self.procs if HOLDS in self.log(n).rsplit(STANDS_BY, 1)[-1]]
        return holding[0] if len(holding) == 1 else None

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGCONT)
            stop_process(proc)
        for name in self.procs:
            print(f"--- {name}.log\n{self.log(name)[-3000:]}")


@pytest.fixture
def bots(redis_server, r, slack_api: SlackAPI, tmp_path: Path) -> Iterator[Bots]:
    running = Bots(tmp_path, redis_server.url, slack_api)
    yield running
    running.stop()


def stopped_run(store: EventStore, run: str) -> list[Event]:
    """What the workers append for a run whose loss turned NaN: anomaly, STOP, evidence (chart and report
    kept in Redis for the bot), the stop's outcome: the STOP in the channel, the chart and report (one
    upload of two files) and STOPPED in its thread (the anomaly is said by the STOP that follows it)."""
    seq = iter(range(1, 100))

    def ev(event_type: str, **data: object) -> Event:
        return make_event(event_type, run=run, host="worker", producer=f"eval/{run}", seq=next(seq),
                          data={"run_host": "gpu1", **data}, ts=2000.0 + len(run))  # fmt: skip

    decision = ev(t.DECISION, decision="STOP", rule="loss-nonfinite", reason="loss=nan at step 25",
                  values={"loss": float("nan"), "step": 25})  # fmt: skip
    packfiles.keep(
        store.redis,
        store.keys,
        run=run,
        event_id=decision.id,
        files={packfiles.CHART: PNG_MAGIC + b"chart of " + run.encode(), packfiles.REPORT: b"# report\n"},
    )
    return [
        ev(t.ANOMALY_OPENED, rule="loss-nonfinite", reason="loss=nan at step 25", severity="critical",
           values={"loss": float("nan"), "step": 25}),
        decision,
        ev(t.EVIDENCE_BUILT, decision=decision.id, rule="loss-nonfinite", path=f"/gone/{run}"),
        ev(t.STOP_DONE, detail=f"sent Ctrl-C to train-{run}; it exited after 0.1s"),
    ]  # fmt: skip


def add_runs(store: EventStore, runs: list[str]) -> None:
    """As the workers commit them: the anomaly with the STOP, then the evidence, then the stop's outcome,
    the runs interleaved (so one run's feed entries may reach different notifiers)."""
    written = {run: stopped_run(store, run) for run in runs}
    for batch in (slice(0, 2), slice(2, 3), slice(3, 4)):
        for run in runs:
            store.append(written[run][batch])


def all_posted(api: SlackAPI, runs: list[str]) -> bool:
    keys = {m.key for m in api.messages}
    files = {u.comment for u in api.uploads}
    return all(f"eval/{run}:4" in keys for run in runs) and len(files) >= len(runs)


def check_exactly_once(api: SlackAPI, runs: list[str]) -> None:
    """Each message and each upload once; every run's replies in its own thread."""
    keys = Counter(m.key for m in api.messages)
    duplicates = {k: n for k, n in keys.items() if n > 1}
    assert not duplicates, f"posted more than once: {duplicates}"
    assert set(keys) == {f"eval/{run}:{i}" for run in runs for i in (2, 4)}
    assert len(api.uploads) == 2 * len(runs), [u.comment for u in api.uploads]
    assert len(api.parents()) == len(runs)
    for parent in api.parents():
        run = parent.key.split("/")[1].split(":")[0]  # type: ignore[union-attr]
        replies = api.replies(parent.ts)
        assert parent.key == f"eval/{run}:2"  # the STOP
        assert [m.key for m in replies] == [f"eval/{run}:4"]  # STOPPED, in the run's thread
        assert {u.thread_ts for u in api.uploads if run in (u.comment or "")} == {parent.ts}


def test_two_bots_post_once_and_the_standby_takes_over_from_a_killed_one(bots: Bots, store: EventStore,
                                                                         slack_api: SlackAPI) -> None:  # fmt: skip
    bots.start("bot1")
    bots.start("bot2")
    first = wait_for(bots.holder, timeout=60, what="one bot holding the lease")
    other = "bot2" if first == "bot1" else "bot1"
    wait_for(lambda: STANDS_BY in bots.log(other), timeout=30, what="the other standing by")
    runs = [f"run{i}" for i in range(8)]
    # Slack rate-limits the first posts: an entry waiting on Retry-After is claimed by an idle notifier
    # (reclaim_idle_s: 1), which posted it a second time before the lease (1 duplicate in 3 of 3 runs)
    slack_api.fail("chat.postMessage", "429", "429", "429")
    add_runs(store, runs[:4])
    wait_for(lambda: all_posted(slack_api, runs[:4]), timeout=60, what="the first four runs posted")
    check_exactly_once(slack_api, runs[:4])

    os.killpg(bots.procs[first].pid, signal.SIGKILL)
    bots.procs[first].wait()
    killed = time.monotonic()
    add_runs(store, runs[4:])
    wait_for(lambda: all_posted(slack_api, runs), timeout=60, what="the standby posting the other four")
    took_over_s = time.monotonic() - killed
    print(f"MEASURED: kill -9 of the holder -> every message of 4 new runs posted by the standby: {took_over_s:.2f}s")
    assert HOLDS in bots.log(other)
    check_exactly_once(slack_api, runs)


def test_a_holder_paused_past_its_lease_posts_nothing_when_it_wakes(bots: Bots, store: EventStore,
                                                                     slack_api: SlackAPI) -> None:  # fmt: skip
    """SIGSTOP the holder: its lease lapses, the standby takes over and posts; SIGCONT: the old holder's
    writes and posts are refused by the fencing token, and it stands by."""
    bots.start("bot1")
    first = wait_for(bots.holder, timeout=60, what="bot1 holding the lease")
    bots.start("bot2")
    wait_for(lambda: STANDS_BY in bots.log("bot2"), timeout=30, what="bot2 standing by")
    runs = [f"run{i}" for i in range(6)]
    add_runs(store, runs[:2])
    wait_for(lambda: all_posted(slack_api, runs[:2]), timeout=60, what="two runs posted")

    os.killpg(bots.procs[first].pid, signal.SIGSTOP)
    paused = time.monotonic()
    add_runs(store, runs[2:4])  # its blocked read may have been handed these already
    wait_for(lambda: HOLDS in bots.log("bot2"), timeout=LEASE_S * 10, what="bot2 taking over")
    print(f"MEASURED: holder paused -> standby holds the lease after {time.monotonic() - paused:.2f}s "
          f"(lease {LEASE_S}s)")  # fmt: skip
    wait_for(lambda: all_posted(slack_api, runs[:4]), timeout=60, what="bot2 posting runs 2-3")
    os.killpg(bots.procs[first].pid, signal.SIGCONT)
    add_runs(store, runs[4:])
    wait_for(lambda: "no longer holds the notifier lease" in bots.log(first), timeout=30, what="bot1 stepping down")
    wait_for(lambda: all_posted(slack_api, runs), timeout=60, what="every run posted")
    time.sleep(2)  # whatever the woken holder would still post has arrived by now
    check_exactly_once(slack_api, runs)
    assert bots.procs[first].poll() is None  # it stands by, ready to take over again


def test_a_bot_on_a_taken_http_port_says_so_in_one_line(redis_server, r, slack_api: SlackAPI,
                                                        tmp_path: Path) -> None:  # fmt: skip
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        settings = bot_settings(tmp_path, redis_server.url, "late", port)
        done = subprocess.run(cli_argv(settings, "bot"), capture_output=True, text=True, timeout=60,
                              env={**os.environ, **ENV, "SLACK_API_URL": slack_api.url}, check=False)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if "slack_bolt" not in line]  # bolt's own start-up warning
    assert lines == [
        f"trainwarden: error: the Slack HTTP endpoint cannot listen on 127.0.0.1:{port}: Address already in use; "
        "another process listens there (a second `trainwarden bot`?): stop it, or set slack.http_port"
    ], done.stderr

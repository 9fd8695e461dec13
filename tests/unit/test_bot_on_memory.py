"""The bot's slash commands and buttons on the in-memory store (events/memory.py): no Redis, no Slack, no processes.

The same `Handlers` the bot wires to Redis (bot/handlers.py) handles each request here on a MemoryStore; what a
command does is what it appends to the run's log and what it replies. The HTTP and Redis path of the same
commands: tests/integration/test_slack_commands.py.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest
from trainwarden.bot.config import BotConfig
from trainwarden.bot.errors import BadInput
from trainwarden.bot.handlers import Handlers
from trainwarden.core.errors import TrainwardenError
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.memory import MemoryStore
from trainwarden.remote.fleet import Experiment, Fleet, Server

from tests.helpers import metric

USER = "U1"


def of(store: MemoryStore, run: str, event_type: str) -> list[Event]:
    return [e for _, e in store.iter_run(run) if isinstance(e, Event) and e.type == event_type]


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore()
    store.append([metric("exp01", i, step=i * 10, loss=2.0 - i / 100) for i in range(1, 6)])
    return store


@pytest.fixture
def bot(store: MemoryStore) -> Handlers[MemoryStore]:
    return Handlers(store=store, config=BotConfig(), host="h", fleet=None, launcher=None)


def finish(store: MemoryStore, run: str) -> None:
    store.append_one(make_event(t.RUN_FINISHED, run=run, host="gpu1", producer=f"gpu1/run/{run}", seq=1,
                                data={"exit_code": 0}, ts=2000.0))  # fmt: skip


def guarded_stop(store: MemoryStore) -> Event:
    decision = make_event(t.DECISION, run="exp01", host="w", producer="eval/exp01", seq=1,
                          data={"decision": "STOP", "rule": "r", "reason": "x", "confirm_s": 300})  # fmt: skip
    store.append_one(decision)
    return decision


def test_stop_asks_first_and_its_button_appends_the_stop_request(bot, store):
    reply = bot.command("tw", "stop exp01 lr too high", user=USER)
    assert reply.text == "Stop exp01? Reason: lr too high"
    assert of(store, "exp01", t.STOP_REQUESTED) == []  # nothing before the click
    button = reply.blocks[1]["elements"][0]
    clicked = bot.stop_run(json.loads(button["value"]), user=USER)
    assert clicked.text == f"Stop of exp01 requested by <@{USER}>; the outcome goes to the run's thread."
    (requested,) = of(store, "exp01", t.STOP_REQUESTED)
    assert requested.data["user"] == USER and requested.data["reason"] == "lr too high"


def test_stop_of_an_unknown_run_names_the_closest_and_appends_nothing(bot, store):
    with pytest.raises(BadInput, match=r"Unknown run 'exp1'\. Did you mean exp01\?"):
        bot.command("stop", "exp1", user=USER)
    assert of(store, "exp01", t.STOP_REQUESTED) == []


def test_an_ended_run_gets_no_stop_button_and_a_stale_button_appends_nothing(bot, store):
    finish(store, "exp01")
    reply = bot.command("tw", "stop exp01", user=USER)
    assert reply.text == "exp01 has already finished; nothing was done." and reply.blocks == []
    assert bot.stop_run({"run": "exp01", "reason": "x"}, user=USER).text == reply.text
    assert of(store, "exp01", t.STOP_REQUESTED) == []


def test_snooze_appends_a_snooze_until_then(bot, store):
    reply = bot.command("tw", "snooze exp01 loss-spike 2h", user=USER)
    assert reply.in_channel and reply.text.startswith(f"<@{USER}> snoozed loss-spike on exp01 until ")
    (snooze,) = of(store, "exp01", t.SNOOZE_SET)
    assert snooze.data["rule"] == "loss-spike" and snooze.data["user"] == USER and snooze.data["by"] == "slack"
    assert snooze.data["until"] == pytest.approx(time.time() + 7200, abs=60)


def test_status_lists_active_runs_and_one_run_in_detail(bot, store):
    store.append_one(make_event(t.GPU, run="exp01", host="gpu1", producer="gpu1/gpu/exp01", seq=1,
                                data={"util": 87.0}, ts=1006.0))  # fmt: skip
    store.append([metric("old", 1, step=1, loss=1.0)])
    finish(store, "old")
    overview = bot.command("tw", "status", user=USER).text.splitlines()
    assert overview[0].startswith("exp01@gpu1 running step 50 loss 1.95 ")
    assert " gpu 87% " in overview[0] and "anomalies none" in overview[0]
    assert len(overview) == 2  # and a line saying one ended run is left out
    everything = bot.command("tw", "status all", user=USER).text.splitlines()
    assert [line.split("@")[0] for line in everything] == ["exp01", "old"]
    detail = bot.command("tw", "status exp01", user=USER).text
    assert detail.startswith("*exp01@gpu1* is running") and "Decisions: none yet" in detail


def test_keep_running_cancels_a_guarded_stop_and_stop_now_then_changes_nothing(bot, store):
    decision = guarded_stop(store)
    value = {"run": "exp01", "rule": "r", "decision": decision.id}
    kept = bot.keep_running(value, user=USER)
    assert kept.text.startswith(f"<@{USER}> kept exp01 running; r is snoozed until")
    (cancelled,) = of(store, "exp01", t.STOP_CANCELLED)
    (snooze,) = of(store, "exp01", t.SNOOZE_SET)
    assert cancelled.data["decision"] == decision.id and snooze.data["rule"] == "r"
    assert bot.stop_now(value, user=USER).text == "The stop of exp01 was already decided; nothing changed."
    assert of(store, "exp01", t.STOP_REQUESTED) == []


def test_stop_now_requests_the_stop_for_the_decision(bot, store):
    decision = guarded_stop(store)
    reply = bot.stop_now({"run": "exp01", "rule": "r", "decision": decision.id}, user=USER)
    assert reply.text.startswith("Stop of exp01 requested")
    (requested,) = of(store, "exp01", t.STOP_REQUESTED)
    assert requested.data["decision"] == decision.id and requested.data["user"] == USER


class NeverLaunches:
    """A launcher for /launch's refusals: each refusal comes before a launch, so none may happen."""

    def __init__(self, held: str | None = None) -> None:
        self.reason = held

    def launch(self, experiment: str, *, user: str, force: bool = False) -> Event:
        raise TrainwardenError(f"{experiment} was launched although /launch refused it")

    def held(self, experiment: str) -> str | None:
        return self.reason


def test_launch_refusals_append_nothing(bot, store):
    with pytest.raises(BadInput, match="No experiments are configured"):
        bot.command("tw", "launch demo-exp", user=USER)
    server = Server(name="gpu1", host="127.0.0.1", user="nobody", work_dir="/nonexistent")
    exp = Experiment(name="demo-exp", server="gpu1", command=("python", "train.py"))
    bot.fleet = Fleet(servers={"gpu1": server, "gpu2": replace(server, name="gpu2")}, experiments={"demo-exp": exp})
    bot.launcher = NeverLaunches(held="plan p1 holds it: /tw launch demo-exp --force")
    with pytest.raises(BadInput, match="demo-exp runs on gpu1"):
        bot.command("tw", "launch demo-exp gpu2", user=USER)
    held = bot.command("tw", "launch demo-exp", user=USER)
    assert "plan p1 holds it" in held.text and held.then is None  # refused: nothing runs after the reply
    assert [run for run, _ in store.runs()] == ["exp01"]


def test_status_of_a_run_launched_again_is_the_new_launchs_and_asking_does_not_date_it(bot):
    store = bot.store
    ago = time.time() - 600.0

    def at(event_type: str, seq: int, ts: float, **data: object) -> Event:
        return make_event(event_type, run="nc-long", host="gpu1", producer="p", seq=seq, ts=ts, data=data)

    store.append([at(t.RUN_LAUNCHED, 1, ago - 400, host="gpu1", session="train-nc-long"),
                  *(at(t.METRIC, 1 + i, ago - 400 + i, step=i * 10, loss=4.0 - i / 100) for i in range(1, 40)),
                  at(t.STOP_DONE, 50, ago - 300, detail="sent Ctrl-C"),
                  at(t.RUN_LAUNCHED, 60, ago, host="gpu1", session="train-nc-long", attempt=1),
                  at(t.AGENT_HEARTBEAT, 61, ago + 300, interval_s=30.0),
                  at(t.COMMAND_RECEIVED, 62, time.time(), user=USER, command="status", text="nc-long")])  # fmt: skip
    line = bot.command("tw", "status nc-long", user=USER).text.splitlines()[1]
    assert line.startswith("nc-long@gpu1 launched ") and "step 390" not in line and " loss n/a " in line
    assert line.endswith(" last 10m ago")  # its launch: not the heartbeat, nor a /tw status asked just now (its audit)

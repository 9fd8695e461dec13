"""/status with a few hundred runs, against the real `trainwarden bot` process in HTTP mode: the
signed slash command is acknowledged at once and empty, the list arrives at the response_url, active
runs only, the most urgent first, one screen."""

import time

import pytest
from trainwarden.bot.status import SCREEN_LINES
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event

from tests.helpers import metric
from tests.slack_bot import bot_process, command, command_reply, send_command

pytestmark = [pytest.mark.redis]

RUNS = 400


def event(event_type, run, seq, **data):
    return make_event(event_type, run=run, host="gpu1", producer=f"gpu1/test/{run}", seq=seq, data=data)


def anomaly(run, seq, rule):
    return event(t.ANOMALY_OPENED, run, seq, rule=rule, severity="critical", reason=f"{rule} at step 30",
                 values={"loss": 9.0}, remedy=None, decision=None, trigger="x", policy="p")  # fmt: skip


def fleet_of_runs():
    """RUNS runs with three metrics each; every fourth ended (finished, failed, or stopped: stop.done);
    run398 has a stop under way, run396 two open anomalies, run399 one."""
    events = []
    for i in range(RUNS):
        run = f"run{i:03d}"
        events += [metric(run, s, step=s * 10, loss=2.0 - s / 100) for s in range(1, 4)]
        if i % 12 == 1:
            events.append(event(t.RUN_FINISHED, run, 4, exit_code=0))
        elif i % 12 == 5:
            events.append(event(t.RUN_FAILED, run, 4, exit_code=1))
        elif i % 12 == 9:
            events += [event(t.STOP_REQUESTED, run, 4, by="cli", reason="done"), event(t.STOP_DONE, run, 5)]
    events.append(event(t.STOP_REQUESTED, "run398", 4, by="slack", user="U1", reason="lr too high"))
    events += [anomaly("run396", 4, "loss-spike"), anomaly("run396", 5, "grad-norm"), anomaly("run399", 4, "nan")]
    return events


def test_status_with_400_runs_acks_at_once_and_lists_the_active_runs_on_one_screen(
    store, slack_api, redis_server, tmp_path
):
    events = fleet_of_runs()
    for start in range(0, len(events), 500):
        store.append(events[start : start + 500])
    with bot_process(tmp_path, redis_server.url, slack_api) as bot:
        started = time.perf_counter()
        status, ack, reply_to = send_command(bot.url, slack_api, "status", "")
        ack_s = time.perf_counter() - started
        assert status == 200 and ack == {}  # no status body in the acknowledgement
        reply = command_reply(slack_api, reply_to)
        reply_s = time.perf_counter() - started
        print(f"/status over {RUNS} runs (first read, no view snapshots): ack {ack_s * 1000:.0f} ms, "
              f"reply at the response_url after {reply_s:.2f} s")  # fmt: skip
        assert ack_s < 3  # Slack's limit (the figure itself is reported, not asserted)
        assert reply["response_type"] == "ephemeral"
        lines = reply["text"].splitlines()
        runs = [line.split("@")[0] for line in lines[:SCREEN_LINES]]
        assert runs[:5] == ["run398", "run396", "run399", "run000", "run002"]  # most urgent first, then by name
        assert " stopping " in lines[0] and "anomalies loss-spike, grad-norm " in lines[1]
        assert all(int(run[3:]) % 4 != 1 for run in runs)  # active runs only
        assert lines[SCREEN_LINES:] == [
            "… and 285 more: /tw status RUN for one run",
            "100 ended runs not shown: /tw status all",
        ]

        started = time.perf_counter()
        _, everything = command(bot.url, slack_api, "status", "all")
        print(f"/status all over {RUNS} runs (views snapshotted): reply after {time.perf_counter() - started:.2f} s")
        lines = everything["text"].splitlines()
        assert len(lines) == SCREEN_LINES + 1 and lines[-1] == "… and 385 more: /tw status RUN for one run"
        _, one = command(bot.url, slack_api, "status", "run001")
        assert one["text"].startswith("*run001@gpu1* is finished")

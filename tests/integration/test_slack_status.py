"""/status with a few hundred runs, against the real `trainwarden bot` process in HTTP mode: the
signed slash command is acknowledged at once and empty, the list arrives at the response_url, active
runs only, the most urgent first, one screen."""

import time

import pytest
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.ops.status import SCREEN_LINES

from tests.helpers import metric, wait_for
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


def gpu(run, seq, util):
    return make_event(t.GPU, run=run, host="gpu1", producer=f"gpu1/gpu/{run}", seq=seq, data={"util": util})


def test_status_of_400_live_runs_reads_them_together_and_saves_their_views_after_the_reply(
    store, slack_api, redis_server, tmp_path
):
    """Every view moved since the last /status (live runs): the list is right, the moved views are saved once the
    reply is out, and the GPU column comes from the batched scan, near and far in a run's recent entries."""
    events = fleet_of_runs()
    events += [gpu("run000", 10, 71), gpu("run002", 10, 33)]
    events += [metric("run002", s, step=s * 10, loss=1.5) for s in range(11, 51)]  # past the first page of the scan
    for start in range(0, len(events), 500):
        store.append(events[start : start + 500])
    names = [f"run{i:03d}" for i in range(RUNS)]

    def sid(raw):
        ms, seq = raw.split(b"-")
        return int(ms), int(seq)

    def lasts():
        return [sid(store.redis.xrevrange(store.keys.log(run), count=1)[0][0]) for run in names]

    def saved_past(appended):
        """Every view saved at or past what the test appended (the notifier may append to ended runs meanwhile)."""
        afters = [store.redis.hget(store.keys.view(run), "after") for run in names]
        return all(after is not None and sid(after) >= last for after, last in zip(afters, appended, strict=True))

    with bot_process(tmp_path, redis_server.url, slack_api) as bot:
        appended = lasts()
        command(bot.url, slack_api, "status", "")
        wait_for(lambda: saved_past(appended), timeout=30, what="every view saved after the first reply")
        store.append([metric(f"run{i:03d}", 60, step=600, loss=1.0) for i in range(RUNS)])  # every view moves
        store.append([anomaly("run250", 61, "loss-spike")])
        appended = lasts()
        _, reply = command(bot.url, slack_api, "status", "")
        lines = reply["text"].splitlines()
        runs = [line.split("@")[0] for line in lines[:SCREEN_LINES]]
        assert runs[:6] == ["run398", "run396", "run250", "run399", "run000", "run002"]
        assert "anomalies loss-spike " in lines[2] and " step 600 " in lines[2]
        assert " gpu 71% " in lines[4] and " gpu 33% " in lines[5] and " gpu n/a " in lines[6]
        assert lines[SCREEN_LINES:] == [
            "… and 285 more: /tw status RUN for one run",
            "100 ended runs not shown: /tw status all",
        ]
        wait_for(lambda: saved_past(appended), timeout=30, what="every moved view saved after the second reply")

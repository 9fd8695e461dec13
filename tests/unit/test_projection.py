import math
from collections import deque

from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.projection import RunState, apply, fold, unknown_types


def ev(event_type, seq, **data):
    return make_event(event_type, run="exp01", host="gpu1", producer="p", seq=seq, data=data, ts=100.0 + seq)


def history():
    return [
        ev(t.RUN_LAUNCHED, 1, session="train-exp01", host="gpu1", log_path="/x.log"),
        ev(t.METRIC, 2, step=1, loss=2.0),
        ev(t.METRIC, 3, step=2, loss=1.5, lr=1e-3),
        ev(t.DECISION, 4, decision="CONTINUE", rule=None, reason="healthy"),
        ev(t.ANOMALY_OPENED, 5, rule="loss-nonfinite", reason="loss=nan", severity="critical"),
        ev(t.METRIC, 6, step=3, loss=math.nan),
        ev(t.DECISION, 7, decision="STOP", rule="loss-nonfinite", reason="loss=nan at step 3"),
        ev(t.STOP_REQUESTED, 8, by="policy"),
        ev(t.EVIDENCE_BUILT, 9, path="/evidence/exp01/x"),
        ev(t.STOP_DONE, 10, detail="killed"),
        ev(t.COMMAND_RECEIVED, 11, user="U1", text="/status exp01"),
        ev("gpu.fan", 12, rpm=0),
    ]


def test_fold_builds_the_run_state():
    state = fold(history())
    assert state.run == "exp01"
    assert state.status == "stopped"
    assert state.decision == "STOP"
    assert state.step == 3
    assert state.last_metrics["lr"] == 1e-3
    assert math.isnan(state.last_metrics["loss"])
    assert state.open_anomalies.keys() == {"loss-nonfinite"}
    assert [d["decision"] for d in state.decisions] == ["CONTINUE", "STOP"]
    assert state.evidence == ["/evidence/exp01/x"]
    assert [c["user"] for c in state.commands] == ["U1"]
    assert state.event_count == 12


def test_unknown_types_are_kept_and_counted():
    assert unknown_types(fold(history())) == {"gpu.fan": 1}


def test_incremental_apply_equals_fold_and_survives_serialisation():
    events = history()
    state = RunState()
    for i, event in enumerate(events):
        if i % 3 == 0:  # a worker restart: state goes through its checkpoint form
            state = RunState.from_dict(state.to_dict())
        apply(state, event)
    assert state.to_dict().keys() == fold(events).to_dict().keys()
    assert str(state.to_dict()) == str(fold(events).to_dict())


def test_resolve_closes_the_anomaly():
    state = fold([ev(t.ANOMALY_OPENED, 1, rule="r"), ev(t.ANOMALY_RESOLVED, 2, rule="r")])
    assert state.open_anomalies == {}
    assert state.anomalies_opened == 1


def test_windows_are_bounded():
    state = fold(ev(t.METRIC, i, step=i, loss=1.0) for i in range(1, 500))
    assert len(state.recent_metrics) == 50
    assert state.recent_metrics[-1]["step"] == 499


def test_relaunch_resets_decision():
    state = fold([*history(), ev(t.RUN_LAUNCHED, 13, session="train-exp01")])
    assert state.status == "launched"
    assert state.decision is None


def test_an_end_after_a_stop_request_is_stopped_whatever_the_exit_code():
    launched = [ev(t.RUN_LAUNCHED, 1, session="s"), ev(t.METRIC, 2, step=1, loss=1.0)]
    for end in (ev(t.RUN_FAILED, 4, exit_code=130, launch=1), ev(t.RUN_FAILED, 4, exit_code=None, launch=1),
                ev(t.RUN_FINISHED, 4, exit_code=0, launch=1)):  # fmt: skip
        assert fold([*launched, ev(t.STOP_REQUESTED, 3, by="cli"), end]).status == "stopped"
        assert fold([*launched, ev(t.STOP_REQUESTED, 3, by="cli"), ev(t.STOP_DONE, 4, detail="x"), end]).status == (
            "stopped"
        )
    assert fold([*launched, ev(t.RUN_FAILED, 4, exit_code=1, launch=1)]).status == "failed"
    assert fold([*launched, ev(t.RUN_FINISHED, 4, exit_code=0, launch=1)]).status == "finished"


def test_the_last_activity_is_the_last_training_or_lifecycle_event():
    # the agent's heartbeats and a /status asked about the run go on after its end: they are not its activity
    events = [ev(t.RUN_LAUNCHED, 1, session="s"), ev(t.METRIC, 2, step=1, loss=1.0),
              ev(t.RUN_FINISHED, 3, exit_code=0, launch=1), ev(t.AGENT_HEARTBEAT, 600, interval_s=30.0),
              ev(t.COMMAND_RECEIVED, 800, user="U1", text="/tw status exp01"),
              ev(t.DECISION, 801, decision="CONTINUE", rule=None, reason="healthy")]  # fmt: skip
    state = fold(events)
    assert state.last_activity_ts == 103.0  # the run.finished
    assert state.last_ts == 901.0  # the log's last event is still known, for replay's span
    assert fold(events[:2] + events[3:4]).last_activity_ts == 102.0  # a heartbeat before the end moves nothing


def test_a_state_saved_before_the_last_activity_existed_reads_its_last_event():
    saved = fold(history()).to_dict()
    del saved["last_activity_ts"]
    assert RunState.from_dict(saved).last_activity_ts == saved["last_ts"]
    assert RunState.from_dict({}).last_activity_ts is None


def attempt(first_seq, steps, *, loss, **launch):
    """One launch of the run `exp01`: launched, its metrics, a STOP and its end."""
    out = [ev(t.RUN_LAUNCHED, first_seq, session="train-exp01", **launch)]
    out += [ev(t.METRIC, first_seq + i, step=i * 10, loss=loss - i / 100) for i in range(1, steps + 1)]
    n = first_seq + steps
    return [*out, ev(t.LOG_LINE, n + 1, tag="traceback", line="ValueError"),
            ev(t.DECISION, n + 2, decision="STOP", rule="loss-spike", reason="loss spiked"),
            ev(t.EVIDENCE_BUILT, n + 3, path=f"/ev/exp01/{first_seq}"), ev(t.STOP_DONE, n + 4, detail="killed"),
            ev(t.RUN_FAILED, n + 5, exit_code=130, launch=first_seq)]  # fmt: skip


def test_a_new_launch_of_the_name_starts_with_a_state_of_its_own():
    first = attempt(1, 39, loss=3.78)
    second = [ev(t.RUN_LAUNCHED, 100, session="train-exp01", host="gpu2", attempt=1),
              ev(t.METRIC, 101, step=1, loss=2.5)]  # fmt: skip
    state = fold([*first, *second])
    # nothing of the first launch (step 390, its 39 samples, its STOP, its evidence) is the second's
    assert (state.status, state.step, state.host) == ("running", 1, "gpu2")
    assert [m["loss"] for m in state.recent_metrics] == [2.5] and state.last_metrics == {"step": 1, "loss": 2.5}
    assert state.decision is None and state.decisions == [] and state.stops == [] and state.evidence == []
    assert state.recent_log_lines == deque() and state.exit_code is None and state.anomalies_opened == 0
    assert state.launch_seq == 100
    # the log's own figures count both launches; replay reads both from the log
    assert state.event_count == len(first) + 2 and state.type_counts[t.RUN_LAUNCHED] == 2
    assert state.first_ts == 101.0


def test_a_resume_carries_on_the_run_before_it():
    first = attempt(1, 39, loss=3.78)
    resume = ev(t.RUN_LAUNCHED, 100, session="train-exp01", resume=True, attempt=2, checkpoint="/ck/step_390.pt")
    state = fold([*first, resume])
    assert state.status == "launched" and state.decision is None  # a new launch, as before
    assert state.step == 390 and len(state.recent_metrics) == 39 and state.evidence == ["/ev/exp01/1"]


def test_incremental_apply_across_a_new_launch_equals_fold():
    events = [*attempt(1, 5, loss=3.0), *attempt(100, 3, loss=2.0)]
    state = RunState()
    for i, event in enumerate(events):
        if i % 4 == 0:  # a worker restart: state goes through its checkpoint form
            state = RunState.from_dict(state.to_dict())
        apply(state, event)
    assert str(state.to_dict()) == str(fold(events).to_dict())

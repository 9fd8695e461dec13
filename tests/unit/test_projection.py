import math

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

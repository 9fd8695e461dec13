"""The noise-control stages, pure: a fold of events gives notices and a state, twice the same."""

import copy

from trainwarden.bot.stages import NotifyState, Pipeline
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event


def ev(seq, event_type, ts=None, **data):
    return make_event(event_type, run="r1", host="w", producer="eval/r1", seq=seq, ts=ts or 100.0 + seq,
                      data={"run_host": "gpu1", **data})  # fmt: skip


def fold(events, state=None, threshold=2, window_s=100.0):
    pipeline = Pipeline(flap_threshold=threshold, flap_window_s=window_s)
    state = state or NotifyState()
    out = []
    for e in events:
        notice, reason = pipeline.process(state, e)
        out.append(notice.kind if notice else reason)
    return out, state


def test_fold_is_deterministic_and_state_round_trips():
    events = [ev(1, t.ANOMALY_OPENED, rule="a", reason="x"), ev(2, t.ANOMALY_RESOLVED, rule="a"),
              ev(3, t.ANOMALY_OPENED, rule="a", reason="x"), ev(4, t.ANOMALY_RESOLVED, rule="a"),
              ev(5, t.ANOMALY_OPENED, rule="a", reason="x"), ev(6, t.ANOMALY_RESOLVED, rule="a"),
              ev(7, t.ANOMALY_OPENED, rule="a", reason="x")]  # fmt: skip
    first, state = fold(events)
    second, again = fold(events)
    assert first == second == [t.ANOMALY_OPENED, t.ANOMALY_RESOLVED, t.ANOMALY_OPENED, t.ANOMALY_RESOLVED,
                               "flapping", "unposted", "flapping"]  # fmt: skip
    assert NotifyState.from_dict(copy.deepcopy(state.to_dict())) == again


def test_a_resume_starts_clean_in_the_same_thread():
    state = NotifyState(threads={"C1": "1.0"}, headlines={"C1": "h"}, ended=True, posted_open={"a": "k"},
                        snoozes={"*": 1e12}, owners=["U1"])  # fmt: skip
    out, state = fold([ev(1, t.RUN_LAUNCHED, config={"wandb_url": "https://wandb.test/r1"}, resume=True, attempt=2),
                       ev(2, t.ANOMALY_OPENED, rule="a", reason="x")], state)  # fmt: skip
    assert out == ["healthy", t.ANOMALY_OPENED]
    assert state.threads == {"C1": "1.0"} and state.wandb_url == "https://wandb.test/r1" and not state.ended
    assert state.owners == ["U1"]  # a resume has no owner of its own: it keeps the run's


def test_a_new_launch_of_the_name_starts_clean_in_a_thread_of_its_own():
    state = NotifyState(threads={"C1": "1.0"}, headlines={"C1": "h"}, ended=True, posted_open={"a": "k"},
                        snoozes={"*": 1e12}, owners=["U1"], stop_asked=True)  # fmt: skip
    out, state = fold([ev(1, t.RUN_LAUNCHED, config={"wandb_url": "https://wandb.test/r1"}, attempt=1),
                       ev(2, t.ANOMALY_OPENED, rule="a", reason="x")], state)  # fmt: skip
    assert out == ["healthy", t.ANOMALY_OPENED]
    assert state.threads == {} and state.headlines == {}  # its first message is the parent of a new thread
    assert state.owners == [] and not state.stop_asked and not state.ended


def test_stop_and_failures_are_never_quieted():
    events = [ev(1, t.SNOOZE_SET, rule=None, until=1e12), ev(2, t.DECISION, decision="WAIT", rule="a", reason="x"),
              ev(3, t.DECISION, decision="STOP", rule="a", reason="x"), ev(4, t.STOP_FAILED, error="e", hint="h"),
              ev(5, t.RUN_FAILED, exit_code=1)]  # fmt: skip
    out, _ = fold(events)
    assert out == ["healthy", "snoozed", t.STOP, t.STOP_FAILED, t.RUN_FAILED]


def test_guarded_stop_does_not_end_the_run_until_it_is_carried_out():
    out, state = fold([ev(1, t.DECISION, decision="STOP", rule="a", reason="x", confirm_s=300),
                       ev(2, t.ANOMALY_OPENED, rule="b", reason="y")])  # fmt: skip
    assert out == ["guard", t.ANOMALY_OPENED]
    assert state.guard == "eval/r1:1" and not state.ended


def test_a_rejected_policy_file_is_posted_even_for_an_ended_run():
    rejected = ev(1, t.POLICY_REJECTED, source="/etc/tw/policy.yaml", kept="abc",
                  problems=["/etc/tw/policy.yaml:4:11: unknown rule kind 'spikes'"])  # fmt: skip
    out, _ = fold([rejected], NotifyState(ended=True))
    assert out == [t.POLICY_REJECTED]


def test_the_end_of_a_run_asked_to_stop_is_not_a_failure():
    events = [ev(1, t.STOP_REQUESTED, by="cli", user="ana"), ev(2, t.RUN_FAILED, exit_code=130),
              ev(3, t.STOP_DONE, detail="sent Ctrl-C"), ev(4, t.RUN_LAUNCHED),
              ev(5, t.RUN_FAILED, exit_code=1)]  # fmt: skip
    out, _ = fold(events)
    assert out == ["healthy", "stopped", t.STOP_DONE, "healthy", t.RUN_FAILED]  # a relaunch's failure is one again


def test_the_stop_message_says_the_evidence_could_not_be_written():
    events = [ev(1, t.EVIDENCE_FAILED, decision="d", path="/ev/r1/x", error="[Errno 28] No space left on device",
                 problems=["/ev/r1/x: [Errno 28] No space left on device"], pack=None, findings=None),
              ev(2, t.STOP_DONE, detail="sent Ctrl-C to train-r1")]  # fmt: skip
    pipeline, state = Pipeline(flap_threshold=2, flap_window_s=100.0), NotifyState()
    notices = [pipeline.process(state, e)[0] for e in events]
    assert notices[0] is None
    assert notices[1].text == (
        "STOPPED r1@gpu1: sent Ctrl-C to train-r1. Evidence could not be written: "
        "/ev/r1/x: [Errno 28] No space left on device; fix the path's permissions or space."
    )


def test_anomalies_opened_at_one_moment_are_one_message():
    # fastai's table row `0  nan  nan  0.958595  00:03`: loss-nonfinite and val-nonfinite open on one input
    events = [ev(1, t.ANOMALY_OPENED, ts=50.0, rule="loss-nonfinite", reason="loss=nan", severity="critical"),
              ev(2, t.ANOMALY_OPENED, ts=50.0, rule="val-nonfinite", reason="val_loss=nan", severity="critical"),
              ev(3, t.DECISION, ts=50.0, decision="STOP", rule="loss-nonfinite", reason="loss=nan"),
              ev(4, t.ANOMALY_OPENED, ts=60.0, rule="log-oom", reason="oom", severity="critical")]  # fmt: skip
    out, state = fold(events)
    assert out == [t.ANOMALY_OPENED, "grouped", t.STOP, "inhibited"]
    assert list(state.posted_open) == ["loss-nonfinite"]
    out, _ = fold([events[0], ev(5, t.ANOMALY_OPENED, ts=51.0, rule="val-nonfinite", reason="val_loss=nan")])
    assert out == [t.ANOMALY_OPENED, t.ANOMALY_OPENED]  # a moment later: news of its own

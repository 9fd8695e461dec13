"""Each stage of the notify path alone (pure, no Redis, no Slack): select, inhibit, snooze, dedup, group,
flap, route (the tree), render, rate-limit and the follow-ups' plan; and that noise control words nothing."""

import dataclasses

import pytest
from trainwarden.bot import message_parts, messages
from trainwarden.bot.config import Route
from trainwarden.bot.follow_ups import Update, guard_key, updates
from trainwarden.bot.rate import RateLimit, RateLimiter
from trainwarden.bot.render import render
from trainwarden.bot.routing import Destination, Labels, Outgoing, address, destinations, tree
from trainwarden.bot.sink import Message
from trainwarden.bot.stages import (
    FLAPPING,
    GUARD,
    KEPT,
    STOPPED,
    Flap,
    Notice,
    NotifyState,
    Pipeline,
    dedup,
    group,
    inhibit,
    select,
    snooze,
)
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.heartbeat import Liveness


def ev(seq, event_type, ts=None, **data):
    return make_event(event_type, run="r1", host="w", producer="eval/r1", seq=seq, ts=ts or 100.0 + seq,
                      data={"run_host": "gpu1", **data})  # fmt: skip


def opened(seq, rule="a", ts=None, severity="warning"):
    return ev(seq, t.ANOMALY_OPENED, ts=ts, rule=rule, reason="loss=9", severity=severity, values={"loss": 9.0})


def notice_of(event, state=None):
    notice = select(state or NotifyState(), event)
    assert notice is not None
    return notice


# -- select -----------------------------------------------------------------------------------------


def test_select_makes_a_structured_notice_and_drops_healthy_news():
    state = NotifyState(evidence="/e/pack", fault_line="CUDA out of memory")
    notice = notice_of(ev(1, t.DECISION, decision="STOP", rule="a", reason="loss=nan", confirm_s=60), state)
    assert (notice.kind, notice.rule, notice.broadcast) == (GUARD, "a", True)
    assert notice.facts == messages.Facts("/e/pack", None, "CUDA out of memory")  # as known when selected
    assert select(NotifyState(), ev(2, t.RUN_FINISHED)) is None
    assert select(NotifyState(), ev(3, t.ANOMALY_OPENED, rule="a", reason="x", shadow=True)) is None


def test_select_records_how_a_guard_ends_without_wording_it():
    state = NotifyState(guard="g1", stop_by="U0ALICE")
    assert notice_of(ev(1, t.STOP_DONE, detail="killed"), state).guard_outcome == (STOPPED, "U0ALICE")
    assert notice_of(ev(2, t.STOP_CANCELLED, user="U0BOB"), state).guard_outcome == (KEPT, "U0BOB")
    assert notice_of(ev(3, t.STOP_DONE, detail="killed")).close_guard is None


def test_noise_control_builds_no_text(monkeypatch):
    calls = []
    real = messages.masked_head
    monkeypatch.setattr(messages, "masked_head", lambda *a: calls.append(a) or real(*a))
    pipeline, state = Pipeline(flap_threshold=2, flap_window_s=100.0), NotifyState()
    events = [opened(1), opened(2), ev(3, t.ANOMALY_RESOLVED, rule="a"), opened(4), opened(5), opened(6),
              ev(7, t.SNOOZE_SET, rule="b", until=1e12), opened(8, rule="b"), ev(9, t.RUN_FINISHED)]  # fmt: skip
    out = [pipeline.process(state, e) for e in events]
    assert [n.kind if n else r for n, r in out] == [t.ANOMALY_OPENED, "duplicate", t.ANOMALY_RESOLVED,
                                                    t.ANOMALY_OPENED, "duplicate", "duplicate", "healthy",
                                                    "snoozed", "healthy"]  # fmt: skip
    assert calls == []  # words are the render stage's, after every stage that could drop the notice


# -- inhibit, snooze, dedup, group, flap ------------------------------------------------------------


def test_inhibit():
    assert inhibit(NotifyState(ended=True), notice_of(opened(1))) == (None, "inhibited")
    assert inhibit(NotifyState(stop_asked=True), notice_of(ev(1, t.RUN_FAILED, exit_code=130))) == (None, "stopped")
    assert inhibit(NotifyState(fault="oom"), notice_of(ev(1, t.RUN_FAILED, exit_code=1))) == (None, "follow-on")
    stop = notice_of(ev(2, t.DECISION, decision="STOP", rule="a", reason="x"))
    assert inhibit(NotifyState(ended=True), stop) == (stop, "")  # a STOP always goes out


def test_snooze():
    notice = notice_of(opened(1, ts=500.0))
    assert snooze(NotifyState(snoozes={"a": 600.0}), notice) == (None, "snoozed")
    assert snooze(NotifyState(snoozes={"*": 600.0}), notice) == (None, "snoozed")
    assert snooze(NotifyState(snoozes={"a": 400.0, "b": 900.0}), notice) == (notice, "")


def test_dedup():
    notice = notice_of(opened(1))
    assert dedup(NotifyState(posted_open={"a": "k"}), notice) == (None, "duplicate")
    assert dedup(NotifyState(), notice) == (notice, "")
    resolve = notice_of(ev(2, t.ANOMALY_RESOLVED, rule="a"))
    assert dedup(NotifyState(), resolve) == (None, "unposted")
    assert dedup(NotifyState(posted_open={"a": "k"}), resolve) == (resolve, "")


def test_group():
    notice = notice_of(opened(1, ts=500.0))
    assert group(NotifyState(opened_at=500.0), notice) == (None, "grouped")
    assert group(NotifyState(opened_at=499.0), notice) == (notice, "")


def test_flap_turns_the_third_opening_into_one_flapping_notice_then_silence():
    flap, state = Flap(threshold=2, window_s=100.0), NotifyState()
    first, second = flap(state, notice_of(opened(1, ts=10.0))), flap(state, notice_of(opened(2, ts=20.0)))
    assert first[0] is not None and second[0] is not None
    third, _ = flap(state, notice_of(opened(3, ts=30.0)))
    assert third is not None and (third.kind, third.openings, third.window_s) == (FLAPPING, 3, 100.0)
    assert flap(state, notice_of(opened(4, ts=40.0))) == (None, "flapping")
    assert flap(state, notice_of(ev(5, t.ANOMALY_RESOLVED, rule="a", ts=45.0))) == (None, "flapping")
    assert third.text.startswith("FLAPPING")  # worded only when asked


# -- route ------------------------------------------------------------------------------------------


TREE = tree(
    (
        Route(severity=("critical",), channel="C_ONCALL", mention=("U0ONCALL",), continue_=True),
        Route(
            run=("llm-*",),
            channel="C_LLM",
            routes=(Route(rule=("gpu_*",), channel="C_GPU"), Route(host=("dgx-*",), mention=("U0DGX",))),
        ),
        Route(project=("vision",), channel="C_VISION"),
    ),
    default="C_DEFAULT",
)


@pytest.mark.parametrize(
    ("labels_", "expected"),
    [
        (Labels(run="resnet"), [Destination("C_DEFAULT")]),  # nothing matches: the default route
        (Labels(run="resnet", project="vision"), [Destination("C_VISION")]),
        (Labels(run="llm-7b", rule="loss"), [Destination("C_LLM")]),  # no child matches: the node itself
        (Labels(run="llm-7b", rule="gpu_idle"), [Destination("C_GPU")]),  # a child, on the rule label
        (Labels(run="llm-7b", host="dgx-2"), [Destination("C_LLM", ("U0DGX",))]),  # inherits the channel
        # continue: on call, and also where the run's messages go
        (Labels(run="llm-7b", severity="critical"), [Destination("C_ONCALL", ("U0ONCALL",)), Destination("C_LLM")]),
        # a match, even one that continues, is where it goes: the default is only for what no route takes
        (Labels(run="resnet", severity="critical"), [Destination("C_ONCALL", ("U0ONCALL",))]),
    ],
)
def test_the_route_tree(labels_, expected):
    assert destinations(TREE, labels_) == expected


def test_two_branches_to_one_channel_make_one_message_with_both_mentions():
    both = tree((Route(run=("x",), mention=("U1",), continue_=True), Route(severity=("warning",), mention=("U2",))),
                default="C0")  # fmt: skip
    assert destinations(both, Labels(run="x")) == [Destination("C0", ("U1", "U2"))]


def test_the_route_stage_keys_each_copy_and_names_who_must_act():
    state = NotifyState(owners=["U0ALICE"])
    notice = notice_of(ev(1, t.DECISION, decision="STOP", rule="a", reason="loss=nan"))
    routes = (Route(run=("r*",), channel="C2", continue_=True), Route(severity=("critical",), channel="C3"))
    first, second = address(state, notice, tree=tree(routes, default="C1"))
    assert (first.key, first.destination.channel, first.primary) == (notice.key, "C2", True)
    assert (second.key, second.destination.channel, second.primary) == (f"{notice.key}@C3", "C3", False)
    assert first.mentions == second.mentions == ("U0ALICE",)  # a STOP names the run's owner
    (quiet,) = address(state, notice_of(opened(2)), tree=tree((), default="C1"))
    assert quiet.mentions == ()  # a warning asks nobody


# -- render -----------------------------------------------------------------------------------------


def test_render_words_the_notice_once_into_the_runs_thread():
    state = NotifyState(threads={"C1": "1.5"})
    notice = notice_of(ev(1, t.DECISION, decision="STOP", rule="a", reason="loss=nan"))
    out = Outgoing(notice=notice, destination=Destination("C1"), key=notice.key, mentions=("U0ALICE",))
    message = render(out, state=state, trend=None, snooze_s=600.0)
    assert message.text == f"{notice.text} cc <@U0ALICE>" and message.text.startswith("STOP")
    assert (message.channel, message.thread_ts, message.broadcast, message.key) == ("C1", "1.5", True, notice.key)
    assert message.blocks[0]["text"]["text"] == message.text
    elsewhere = render(Outgoing(notice=notice, destination=Destination("C2"), key="k@C2"), state=state, trend=None,
                       snooze_s=600.0)  # fmt: skip
    assert (elsewhere.thread_ts, elsewhere.broadcast, elsewhere.text) == (None, False, notice.text)


# -- rate-limit -------------------------------------------------------------------------------------


def test_the_rate_limit_stage_waits_for_the_channels_turn():
    now, slept = [0.0], []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(rate_per_s=2.0, burst=1, clock=lambda: now[0])
    stage = RateLimit(limiter, liveness=Liveness(stale_s=60.0), sleep=sleep)
    first = stage(Message(key="k1", run="r1", channel="C1", text="x"))
    second = stage(Message(key="k2", run="r1", channel="C1", text="y"))
    other = stage(Message(key="k3", run="r1", channel="C2", text="z"))
    assert first.paced and second.paced and other.paced  # the sink sends them without taking another turn
    assert slept == [pytest.approx(0.5)]  # C1's second message waited; C2 has its own bucket
    console = RateLimit(None, liveness=Liveness(stale_s=60.0), sleep=sleep)
    unpaced = console(Message(key="k", run="r", channel="C", text="t"))
    assert not unpaced.paced and slept == [pytest.approx(0.5)]  # a sink without a pace (the console)


# -- follow-ups -------------------------------------------------------------------------------------


def test_follow_ups_refresh_the_parent_and_close_the_guard():
    state = NotifyState(threads={"C1": "1.0"}, headlines={"C1": "LAUNCHED r1"}, open_rules=["b"])
    resolve = notice_of(ev(1, t.ANOMALY_RESOLVED, rule="a"))
    out = Outgoing(notice=resolve, destination=Destination("C1"), key=resolve.key)
    assert updates(state, out, None) == [Update("C1", "1.0", message_parts.thread_parent("LAUNCHED r1", ["b"]))]
    assert updates(NotifyState(), out, None) == []  # no thread there: nothing to refresh

    done = notice_of(ev(2, t.STOP_DONE, detail="killed"), NotifyState(guard="g1", stop_by="U0ALICE"))
    primary = Outgoing(notice=done, destination=Destination("C1"), key=done.key)
    copy = Outgoing(notice=done, destination=Destination("C2"), key=f"{done.key}@C2")
    assert (guard_key(primary), guard_key(copy)) == ("g1", "g1@C2")  # each channel's guard message
    guard = {"channel": "C1", "ts": "2.0", "text": "GUARDED STOP r1"}
    (closed,) = updates(NotifyState(), primary, guard)
    stopped = message_parts.guard_outcome_stopped("U0ALICE")
    assert closed == Update("C1", "2.0", message_parts.closed("GUARDED STOP r1", stopped))
    assert updates(NotifyState(), primary, None) == []  # the guard message was never posted


def test_a_notice_of_the_old_shape_is_gone():
    assert "text" not in {f.name for f in dataclasses.fields(Notice)}  # text is a rendering, not a field


def test_a_stop_done_or_a_failure_closes_the_parent_with_the_outcome():
    state = NotifyState(threads={"C1": "1.0"}, headlines={"C1": "ANOMALY r1"}, open_rules=["a"], stop_by="U0ALICE")
    for event, outcome in ((ev(1, t.STOP_DONE, detail="killed"), message_parts.run_stopped("U0ALICE")),
                           (ev(2, t.RUN_FAILED, exit_code=137), message_parts.run_failed(137))):  # fmt: skip
        notice = notice_of(event)
        out = Outgoing(notice=notice, destination=Destination("C1"), key=notice.key)
        assert updates(state, out, None) == [Update("C1", "1.0", message_parts.closed("ANOMALY r1", outcome))]
    assert message_parts.run_stopped(None) == "run stopped" and message_parts.run_failed(None) == "run failed"

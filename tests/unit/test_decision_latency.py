"""The decision latency the worker observes: pure, from the triggering input's timestamp to the commit."""

from trainwarden.core.counters import HISTOGRAMS, Histogram, observe
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.latency import decision_latencies
from trainwarden.events.store import Malformed


def event(kind, seq, ts, **data):
    return make_event(kind, run="r", host="h", producer="h/log/r/g0", seq=seq, data=data, ts=ts)


def decision(seq, trigger, verdict="STOP"):
    return event(t.DECISION, seq, 999.0, decision=verdict, rule="x", reason="x", trigger=trigger, policy="p")


def test_each_decision_is_timed_from_its_own_trigger_and_a_clock_ahead_gives_zero():
    early, late, ahead = event(t.METRIC, 1, 100.0, loss=1.0), event(t.METRIC, 2, 103.5), event(t.METRIC, 3, 110.0)
    inputs = [("1-0", early), ("1-1", Malformed(sid="1-1", reason="bad", fields={})), ("1-2", late), ("1-3", ahead)]
    outputs = [decision(1, late.id), event(t.ANOMALY_OPENED, 2, 999.0), decision(3, early.id, "WAIT"),
               decision(4, ahead.id), decision(5, "elsewhere:7")]  # fmt: skip
    assert decision_latencies(outputs, inputs, now=105.0) == [("STOP", 1.5), ("WAIT", 5.0), ("STOP", 0.0)]
    assert decision_latencies([event(t.ANOMALY_OPENED, 6, 1.0)], inputs, now=105.0) == []


def test_observations_fall_in_the_first_bucket_at_or_above_them():
    for value in (0.25, 3.0, 0.05):
        observe("test_latency", value, (0.1, 0.25, 1.0), decision="STOP")
    hist = HISTOGRAMS.pop("test_latency")[(("decision", "STOP"),)]  # out of the process's own metrics
    assert hist.cumulative() == [("0.1", 1.0), ("0.25", 2.0), ("1.0", 2.0), ("+Inf", 3.0)]
    assert hist.total == 3.3
    assert Histogram((1.0,)).cumulative() == [("1.0", 0.0), ("+Inf", 0.0)]

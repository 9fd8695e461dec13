"""collect_facts on hand-made logs: the cases a short real run cannot show in seconds (a late end, a
resume, a STOP by a rule, a person's stop)."""

from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.remote.collect_facts import BestBy, collect_facts, overall_status

SEQ = iter(range(1, 10_000))


def ev(event_type, ts, **data):
    return make_event(event_type, run="exp", host="h", producer="test", seq=next(SEQ), data=data, ts=ts)


def test_a_late_end_goes_back_to_its_launch_and_a_resume_is_its_own_attempt():
    first = ev(t.RUN_LAUNCHED, 10.0, attempt=1, server="s", plan="p1")
    second = ev(t.RUN_LAUNCHED, 20.0, attempt=2, resume=True, server="s")
    log = [
        ev(t.PREFLIGHT, 5.0, check="disk", ok=True),
        first,
        ev(t.METRIC, 11.0, step=9, loss=1.0),
        ev(t.DECISION, 12.0, decision=t.CONTINUE, rule=None, reason="healthy", trigger="x", policy="h"),
        second,
        ev(t.RUN_FAILED, 21.0, exit_code=None, launch=first.seq, reason="killed by SIGHUP"),  # noticed late
        ev(t.METRIC, 22.0, step=12, loss=0.8),
        ev(t.RUN_FINISHED, 30.0, exit_code=0, launch=second.seq),
    ]
    facts = collect_facts({"exp": log})
    one, two = facts.entries
    assert (one["attempt"], one["status"], one["decision"]) == (1, "failed", "none")
    assert one["failure"] == "gone without an exit code: killed by SIGHUP"
    assert one["launched_at"] == "1970-01-01T00:00:10.000+00:00" and one["plan"] == "p1"
    assert one["final_metrics"] == {"loss": 1.0} and one["step"] == 9
    assert (two["attempt"], two["resume"], two["status"], two["step"]) == (2, True, "finished", 12)
    assert overall_status(facts.entries) == ("done", {"exp": "finished"})  # the latest launch decides


def test_a_stop_by_a_rule_says_the_rule_and_a_persons_stop_says_who():
    ruled = [
        ev(t.RUN_LAUNCHED, 1.0, server="s"),
        ev(t.DECISION, 2.0, decision=t.STOP, rule="nan-loss", reason="loss is NaN", trigger="x", policy="h"),
        ev(t.STOP_REQUESTED, 2.1, by="policy", rule="nan-loss"),
        ev(t.STOP_DONE, 3.0, request="x"),
        ev(t.RUN_FAILED, 3.1, exit_code=130),
    ]
    (entry,) = collect_facts({"exp": ruled}).entries
    assert (entry["status"], entry["decision"], entry["rule"]) == ("stopped", t.STOP, "nan-loss")
    by_hand = [ev(t.RUN_LAUNCHED, 1.0), ev(t.STOP_REQUESTED, 2.0, by="slack", user="U1"), ev(t.STOP_DONE, 3.0)]
    (entry,) = collect_facts({"exp": by_hand}).entries
    assert (entry["decision"], entry["stopped_by"]) == ("none", "slack U1")


def test_best_needs_the_metric_and_says_why_not():
    log = [ev(t.RUN_LAUNCHED, 1.0), ev(t.CHECKPOINT_SAVED, 2.0, path="/c/a.pt")]
    facts = collect_facts({"exp": log}, {"exp": BestBy("val_loss")})
    assert facts.checkpoints["exp"]["best"] is None
    assert facts.checkpoints["exp"]["best_by"] == "unknown: no checkpoint.saved carries val_loss"
    assert collect_facts({"exp": log}).checkpoints["exp"]["best_by"].startswith("unknown: the experiment's")

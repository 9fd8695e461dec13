"""No raw Python values where a person reads: every notice, timeline line, state view, check report,
evidence report and FINAL_SUMMARY rendered from events and states with fields missing (a log may hold
events written by another version, a run may have no step, no host, no decision yet) says what it
knows in words: never `None`, never an object's `<... at 0x...>`, never a dict's or a list's repr."""

import re

import pytest
from trainwarden.bot import messages
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.projection import fold
from trainwarden.ops import render
from trainwarden.workers.evidence import build_pack
from trainwarden.workers.findings import findings_note
from trainwarden.workers.report import check_facts, render_report

RAW = re.compile(r"\bNone\b|0x[0-9a-f]{6,}|\{'|\['|\{\"")


def raw(text: str) -> list[str]:
    return RAW.findall(text)


def empty(event_type: str, **data):
    return make_event(event_type, run="exp01", host="gpu1", producer="p", seq=1, ts=1_700_000_000.0, data=data)


# every known type, with a payload missing every field; STOP/WAIT decisions are notices of their own
EMPTY = [empty(name) for name in sorted(t.KNOWN_TYPES)] + [
    empty(t.DECISION, decision=t.STOP),
    empty(t.DECISION, decision=t.WAIT),
    empty(t.DECISION, decision=t.STOP, confirm_s=60),
    empty(t.RUN_LAUNCHED, requested_by="U1"),
]


@pytest.mark.parametrize("event", EMPTY, ids=lambda e: f"{e.type}-{sorted(e.data)}")
def test_notices_and_timeline_lines_say_missing_fields_in_words(event):
    texts = [render.describe(event), render.timeline_line("1-0", event)]
    notice = messages.notification_text(event)
    texts += [notice] if notice is not None else []
    for text in texts:
        assert not raw(text), text


def test_notice_helpers_with_missing_fields():
    stop_done = empty(t.STOP_DONE)
    texts = [
        messages.stop_done(stop_done, None),
        messages.run_failed(empty(t.RUN_FAILED)),
        messages.flapping(empty(t.ANOMALY_OPENED), openings=3, window_s=600),
        messages.evidence_failed({}),
        messages.launched(empty(t.RUN_LAUNCHED)),
    ]
    for text in texts:
        assert not raw(text), text


def test_state_view_and_check_report_of_a_run_with_nothing_known_yet():
    state = fold([empty(t.RUN_LAUNCHED), empty(t.DECISION), empty(t.STOP_DONE), empty(t.STOP_REQUESTED)])
    lines = render.state_lines(state)
    report = render_report(check_facts(fold([]), now=0.0, interval_s=1800, files_inspected=[]))
    assert "- Decision: WAIT\n- Reason: no data to judge the run by (not announced by the agent yet" in report
    for text in [*lines, report]:
        assert not raw(text), text


def test_the_check_of_a_run_that_failed_before_any_decision_says_it_ended():
    facts = check_facts(fold([]), now=0.0, interval_s=1800, files_inspected=[])
    facts.update(status="failed", open_anomalies={"run-failed": {"reason": "exit_code=2", "severity": "critical"}})
    report = render_report(facts)
    assert "- Decision: none (run ended: failed)\n- Reason: failed before the first step (exit code unknown)" in report
    assert "- Remedy: see the open anomalies" in report


def test_evidence_report_summary_and_findings_note_with_missing_fields(tmp_path):
    decision = empty(t.DECISION, decision=t.STOP)  # a stop without rule, reason, remedy, values or policy
    pack = build_pack(state=fold([]), decision=decision, log_tail=[], files_inspected=[], root=tmp_path)
    note = findings_note(pack.evidence, pack_dir=tmp_path / pack.relative_dir)
    for text in (pack.report, pack.summary, note):
        assert not raw(text), text
    assert " step=- " in pack.summary and "remedy=-" in pack.summary


def test_the_check_is_a_check_that_can_fail():
    assert raw("Rule: None (None)") and raw("<agent.logsource.RunLog object at 0x7f5f781ca110>")
    assert raw("Offending values: {'loss': nan}") and not raw("none open; loss=nan at step 25")

import json
import math
from pathlib import Path

from PIL import Image
from trainwarden.core.words import local_time
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.projection import fold
from trainwarden.workers.chart import render_chart
from trainwarden.workers.evidence import build_pack, excerpt, read_log_tail, triggering_metric, write_pack
from trainwarden.workers.findings import append_note, findings_note

from tests.report_format import skill_fields


def make_state():
    events = [
        make_event(
            t.RUN_LAUNCHED,
            run="exp01",
            host="gpu1",
            producer="l",
            seq=1,
            data={
                "session": "train-exp01",
                "host": "gpu1",
                "log_path": "/x.log",
                "env": {"WANDB_API_KEY": "k" * 40},
                "command": ["python", "train.py"],
            },
        ),
        *[
            make_event(t.METRIC, run="exp01", host="gpu1", producer="a", seq=i, data={"step": i, "loss": 2.0 / i})
            for i in range(1, 20)
        ],
        make_event(t.METRIC, run="exp01", host="gpu1", producer="a", seq=20, data={"step": 20, "loss": math.nan}),
    ]
    return fold(events)


def decision():
    return make_event(
        t.DECISION,
        run="exp01",
        host="w",
        producer="eval/exp01",
        seq=3,
        ts=1_700_000_000.0,
        data={
            "decision": "STOP",
            "rule": "loss-nonfinite",
            "reason": "loss=nan at step 20",
            "values": {"loss": math.nan, "step": 20},
            "severity": "critical",
            "remedy": "lower lr",
            "trigger": "a:20",
            "policy": "abc",
            "run_host": "gpu1",
        },
    )


def test_pack_holds_what_explains_the_stop():
    pack = build_pack(state=make_state(), decision=decision(), log_tail=["step=20 loss=nan"],
                      files_inspected=["/x.log"], root=Path("/ev"), log_lines="lines 41-41")  # fmt: skip
    ev = pack.evidence
    assert pack.relative_dir == "exp01/20231114T221320Z-loss-nonfinite"
    assert (ev["run"], ev["rule"], ev["decision"]) == ("exp01", "loss-nonfinite", "STOP")
    assert ev["offending_values"] == {"loss": "nan", "step": 20}
    assert ev["log_tail"] == ["step=20 loss=nan"]
    assert ev["config"]["env"]["WANDB_API_KEY"] == "***"
    assert len(ev["recent_metrics"]) == 20
    json.dumps(ev, allow_nan=False)  # strict JSON: opens in any tool
    report = pack.report
    fields = skill_fields(report)  # the method's eight lines, in its order, its values
    assert fields["time"] == local_time(1_700_000_000.0)
    assert fields["source"] == "log_fallback" and fields["extra:Source"].startswith("not announced by the agent")
    assert fields["run"] == "exp01 on gpu1 (running, step 20)"
    assert fields["metrics"] == "loss nan (from 2 over 20 samples)"
    assert fields["evidence"] == ("values loss=nan, step=20; log /x.log lines 41-41; "
                                  "evidence pack /ev/exp01/20231114T221320Z-loss-nonfinite")  # fmt: skip
    assert (fields["decision"], fields["reason"]) == ("STOP", "loss=nan at step 20")
    assert fields["next"] == "none (run being stopped)"
    assert fields["extra:Rule"] == "loss-nonfinite (critical)" and fields["extra:Remedy"] == "lower lr"
    assert "### Evidence" not in report and "### Anomalies" not in report  # fields now, not sections
    assert "| 20 | nan |" in report
    assert pack.summary == (
        "FINAL_SUMMARY run=exp01 host=gpu1 decision=STOP rule=loss-nonfinite step=20 "
        "reason='loss=nan at step 20' remedy='lower lr' evidence=/ev/exp01/20231114T221320Z-loss-nonfinite"
    )
    assert pack.summary in report


def test_write_pack_is_repeatable(tmp_path):
    pack = build_pack(state=make_state(), decision=decision(), log_tail=[], files_inspected=[], root=tmp_path)
    first = write_pack(tmp_path, pack)
    second = write_pack(tmp_path, pack)
    assert first == second
    assert sorted(p.name for p in first.iterdir()) == ["evidence.json", "report.md"]
    assert json.loads((first / "evidence.json").read_text())["rule"] == "loss-nonfinite"
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temp dirs left


def test_read_log_tail(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert read_log_tail(str(log), lines=3) == ["line 97", "line 98", "line 99"]
    assert read_log_tail(str(tmp_path / "missing.log")) == []
    assert read_log_tail(None) == []


def test_chart_is_a_png_of_the_triggering_metric_and_loss(tmp_path):
    state = make_state()
    recent = list(state.recent_metrics)
    values = {"loss": math.nan, "step": 20}
    assert triggering_metric(values, recent) == "loss"
    png = render_chart(recent, metric="loss", trigger=values, title="exp01: loss=nan at step 20")
    pack = build_pack(state=state, decision=decision(), log_tail=[], files_inspected=[], root=tmp_path, chart=png)
    target = write_pack(tmp_path, pack)
    assert sorted(p.name for p in target.iterdir()) == ["chart.png", "evidence.json", "report.md"]
    with Image.open(target / "chart.png") as image:
        assert image.format == "PNG"
        assert image.size == (800, 400)
    assert f"; chart {target}/chart.png" in skill_fields((target / "report.md").read_text())["evidence"]


def test_no_chart_without_metrics():
    assert render_chart([], metric="loss", trigger={}, title="x") is None


def test_findings_note_is_appended_once(tmp_path):
    pack = build_pack(state=make_state(), decision=decision(), log_tail=[], files_inspected=[], root=tmp_path)
    findings = tmp_path / "notes" / "findings.md"
    findings.parent.mkdir()
    findings.write_text("# Findings\n\nbaseline reproduced.\n")
    note = findings_note(pack.evidence, pack_dir=tmp_path / pack.relative_dir)
    assert append_note(findings, note, decision_id="eval/exp01:3")
    assert not append_note(findings, note, decision_id="eval/exp01:3")  # a retried action adds nothing
    text = findings.read_text()
    assert text.startswith("# Findings\n\nbaseline reproduced.\n\n## 2023-11-14 22:13 UTC: exp01 stopped by")
    assert text.count("stopped by loss-nonfinite") == 1
    assert "- Reason: loss=nan at step 20" in text


def test_the_tail_ends_shortly_after_the_trigger_when_the_trainer_printed_on(tmp_path):
    """The pack is built after the decision: a fast trainer has printed 80 more lines by then."""
    lines = [f"step={i} loss={2.0 - i / 1000:.4f} lr=8e-4" for i in range(1, 50)]
    lines += ["step=50 loss=nan lr=8e-4"]
    lines += [f"step={i} loss=nan lr=8e-4" for i in range(51, 130)]
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    tail = read_log_tail(str(log), step=50, words=("loss", "nan"))
    assert len(tail) == 30
    assert tail[-11] == "step=50 loss=nan lr=8e-4"  # the line that fired, then the 10 after it
    assert tail[-1] == "step=60 loss=nan lr=8e-4"
    # still in the last lines: the plain tail; no step: the plain tail
    assert read_log_tail(str(log), step=125, words=("loss",))[-1] == lines[-1]
    assert read_log_tail(str(log), step=None)[-1] == lines[-1]


def test_excerpt_prefers_the_line_naming_the_metric_and_ignores_numbers_inside_others():
    every = ["[8/100] loss: 2.1", "lr 8e-5", "epoch 1.8", *(f"[{i}/100] loss: 2.0" for i in range(9, 60))]
    assert excerpt(every, lines=5, step=8, words=("loss",)) == every[:5]
    every[20] = "[8/100] eval done"  # names the step but not the metric: the earlier line is the trigger's
    assert excerpt(every, lines=5, step=8, words=("loss",)) == every[:5]
    assert excerpt(["no step here"] * 40, lines=3, step=8, words=("loss",)) == ["no step here"] * 3


def test_a_stop_before_any_metric_line_says_so_never_step_none(tmp_path):
    # an OOM at start-up: the run has a launch and a fault line, no metric line, so no step yet
    launch = make_state().launch
    state = fold([make_event(t.RUN_LAUNCHED, run="exp01", host="gpu1", producer="l", seq=1, data=launch)])
    assert state.step is None
    stop = decision()
    stop.data["values"] = {"line": "CUDA out of memory"}  # a fault line's rule: no step of its own
    pack = build_pack(state=state, decision=stop, log_tail=[], files_inspected=[], root=tmp_path)
    note = findings_note(pack.evidence, pack_dir=tmp_path / pack.relative_dir)
    for text in (pack.report, pack.summary, note):
        assert "step None" not in text and "step=None" not in text
    assert "step=-" in pack.summary
    assert "before the first step" in pack.report and "before the first step" in note


def test_final_summary_names_the_triggers_step_not_the_last_one_read(tmp_path):
    # the worker folded steps past the NaN before it built the pack: the summary says where the rule fired
    later = [make_event(t.METRIC, run="exp01", host="gpu1", producer="a", seq=i, data={"step": i, "loss": 1.0})
             for i in range(21, 38)]  # fmt: skip
    state = fold(later, make_state())
    assert state.step == 37
    pack = build_pack(state=state, decision=decision(), log_tail=[], files_inspected=[], root=tmp_path)
    assert " step=20 reason='loss=nan at step 20'" in pack.summary
    assert pack.evidence["step"] == 20 and pack.evidence["last_step"] == 37

import json
import math

from events import types as t
from events.envelope import make_event
from events.projection import fold
from workers.evidence import build_pack, read_log_tail, write_pack


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
    pack = build_pack(
        state=make_state(), decision=decision(), log_tail=["step=20 loss=nan"], files_inspected=["/x.log"]
    )
    ev = pack.evidence
    assert pack.relative_dir == "exp01/20231114T221320Z-loss-nonfinite"
    assert (ev["run"], ev["rule"], ev["decision"]) == ("exp01", "loss-nonfinite", "STOP")
    assert ev["offending_values"] == {"loss": "nan", "step": 20}
    assert ev["log_tail"] == ["step=20 loss=nan"]
    assert ev["config"]["env"]["WANDB_API_KEY"] == "***"
    assert len(ev["recent_metrics"]) == 20
    json.dumps(ev, allow_nan=False)  # strict JSON: opens in any tool
    report = pack.report
    assert report.startswith("## Training Check - 2023-11-14")
    for heading in ("Recent metrics", "Anomalies", "Evidence", "Last log lines", "Next check"):
        assert f"### {heading}" in report
    assert "**Decision**: STOP" in report
    assert "| 20 | nan |" in report


def test_write_pack_is_repeatable(tmp_path):
    pack = build_pack(state=make_state(), decision=decision(), log_tail=[], files_inspected=[])
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

"""A run read blind: the agent's state machine (agent/blind.py) and how each view says it (Slack, check, health)."""

from __future__ import annotations

import time

from trainwarden.agent.blind import Blindness, Change, is_bar, shape, trains
from trainwarden.agent.config import FIRST_STEP_BUDGET_S
from trainwarden.agent.reading import MetricReader
from trainwarden.bot import messages
from trainwarden.events import reading
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.projection import fold
from trainwarden.policies.kinds.stall import Stall
from trainwarden.workers.report import check_facts, render_report

from trainwarden.cli.health import notice_text

MADE_UP = [f">> it#{i} -- L={2.3 - i / 100:.2f} ::" for i in range(100)]
BAR = "  3%|▎         | 15/500 [00:02<01:10,  6.90it/s]"


def feed(b: Blindness, lines: list[str], *, every_s: float, metric_at: int | None = None) -> list[tuple[int, str]]:
    """One line a poll; (index of the line, status said) for each change."""
    out = []
    for i, line in enumerate(lines):
        change = b.step(1000.0 + i * every_s, [line], metric=i == metric_at)
        if change is not None:
            out.append((i, change.status))
    return out


def test_a_made_up_format_is_said_unreadable_at_the_line_budget_once_and_readable_when_metrics_come():
    b = Blindness(after_s=60, after_lines=50)
    assert feed(b, MADE_UP, every_s=0.1, metric_at=80) == [(49, reading.UNREADABLE), (80, reading.READABLE)]
    assert b.read and b.step(2000.0, MADE_UP, metric=False) is None  # nothing more once read


def test_the_time_budget_fires_on_a_slow_log_and_quotes_its_latest_metric_looking_line():
    b = Blindness(after_s=60, after_lines=50)
    changes = feed(b, ["starting", *MADE_UP[:20]], every_s=10.0)
    assert changes == [(7, reading.UNREADABLE)]  # 60 s of metric-looking lines after the first ("starting" is not)
    assert b.sample == MADE_UP[6]


def test_a_run_read_from_the_start_says_nothing_and_a_quiet_log_is_not_blind():
    b = Blindness(after_s=60, after_lines=50)
    assert feed(b, MADE_UP, every_s=1.0, metric_at=3) == []
    quiet = Blindness(after_s=60, after_lines=50)
    assert quiet.step(0.0, ["banner", "loading data"], metric=False) is None
    assert quiet.step(600.0, [], metric=False) is None  # ten minutes of silence: silent, not blind


def test_progress_bar_redraws_are_not_counted_as_lines():
    b = Blindness(after_s=60, after_lines=50)
    assert feed(b, [BAR] * 500, every_s=0.1) == []  # 50 s of redraws before a Trainer's first logged step
    assert is_bar(BAR) and is_bar("Epoch 0:  50%|#####     | 5/10 [00:01<00:01]") and not is_bar(MADE_UP[0])


STARTUP = ["compiling model...", *[f"Downloading data: {p}%" for p in range(0, 100, 5)], "Indexing shard 3 of 12",
           "Downloading 1.2 GB of 3.4 GB", "compile took 12.3s", "torch 2.1.0 cuda 12.1"]  # fmt: skip
TABLE = [f"#### {i} | {0.33 - i / 1000:.4f} | 88 ####" for i in range(100)]  # a made-up table: numbers recur


def test_start_up_lines_are_silent_until_the_first_step_budget_then_said_as_start_up():
    b = Blindness(after_s=2, after_lines=5, first_step_s=600, started=1000.0)
    assert feed(b, STARTUP * 10, every_s=1.0) == []  # 250 lines over 4 minutes, past both unreadable budgets
    assert b.numeric == 0 and all(shape(line) is None for line in STARTUP[:-1])
    change = b.step(1600.0, ["Downloading data: 99%"], metric=False)
    assert change is not None and change.status == reading.UNREADABLE and change.startup
    assert change.span_s == 600 and change.sample == "Downloading data: 99%"
    assert b.step(1700.0, TABLE, metric=False) is None  # said once
    assert b.step(1800.0, [], metric=True) == Change(reading.READABLE, 251, 0.0, None)


def test_recurring_numbers_no_reader_understands_are_said_at_unreadable_after_s_amid_start_up_lines():
    b = Blindness(after_s=2, after_lines=50, first_step_s=600)
    lines = [*STARTUP, *[x for pair in zip(TABLE, STARTUP * 5, strict=False) for x in pair]]
    changes = feed(b, lines, every_s=0.25)
    assert changes == [(len(STARTUP) + 8, reading.UNREADABLE)]  # 2 s of table lines after the first
    assert b.sample == TABLE[4] and b.numeric == 5


def test_the_words_name_the_setting_that_moves_them_and_start_up_gets_start_up_advice():
    blind = reading.unreadable_text(reading.unreadable_facts(62, 61, TABLE[5]))
    assert "agent.unreadable_after_s" in blind and "trainwarden.log(...)" in blind
    facts = reading.startup_facts(240, 1200, "compiling model...")
    assert len(facts) < 200 and reading.label(facts) == "NO TRAINING OUTPUT YET"
    said = reading.unreadable_text(facts)
    assert "agent.first_step_budget_s" in said and "compiling" in said and "20m" in said
    assert "trainwarden.log" not in said and "cannot read" not in said
    text = messages.notification_text(_anomaly({"status": reading.UNREADABLE}, f"status=unreadable ({facts})"))
    assert text is not None and text.startswith("NO TRAINING OUTPUT YET r1@gpu1: no training output from this run")
    shown = notice_text(f"{reading.NOTICE}r1: {facts}")
    assert "agent.first_step_budget_s" in shown and "trainwarden.log" not in shown


def test_the_agents_first_step_budget_is_the_stall_rules_by_default():
    assert FIRST_STEP_BUDGET_S == Stall().first_step_budget == FIRST_STEP_BUDGET_S


def test_only_a_known_measurement_read_from_a_log_is_a_training_metric():
    r = MetricReader()
    read = [r.read(line)[0] for line in MADE_UP[:3]]
    assert read[1] and not any(trains(m) for m in read)  # `L=2.3` recurs, so the reader keeps `l`: no rule judges it
    assert trains({"loss": float("nan"), "step": 3}) and not trains({"step": 3, "epoch": 1})


def test_the_sample_is_cut_and_the_facts_fit_in_a_status_rules_reason():
    quoted = reading.sample("x" * 500)
    assert len(quoted) == reading.SAMPLE_CHARS and quoted.endswith("…")
    assert len(reading.unreadable_facts(12345, 61.2, quoted)) < 200  # policies' status kind keeps 200


def test_nonfinite_lines_are_found_and_finite_or_wordless_ones_are_not():
    assert reading.nonfinite_line(["step 1 loss 2.3", "step 6 loss nan", "done"]) == "step 6 loss nan"
    for line in (">> it#5 -- L=inf ::", "grad_norm: -inf", "val_loss=NaN", "loss is nan"):
        assert reading.nonfinite_line([line]) == line, line
    assert reading.nonfinite_line(["step 1 loss 2.3", "Financial data loaded", "infinite loader"]) is None


def _status(status: str, **data: object) -> Event:
    return make_event(t.SOURCE_STATUS, run="r1", host="gpu1", producer="gpu1/status/r1", seq=1, ts=1000.0,
                      data={"source": reading.SOURCE, "status": status, **data})  # fmt: skip


def test_check_says_unreadable_instead_of_no_metrics_yet():
    facts = reading.unreadable_facts(62, 61, MADE_UP[5])
    state = fold([_status(reading.UNREADABLE, reason=facts, lines=62, sample=MADE_UP[5])])
    assert state.source is None  # not the metrics' data source
    out = render_report(check_facts(state, now=time.time(), interval_s=1800, files_inspected=[]))
    assert "no metrics yet" not in out
    assert "UNREADABLE" in out and MADE_UP[5] in out and "trainwarden.log(...)" in out


def test_check_never_says_no_metrics_yet_beside_a_loss_nan_line():
    line = make_event(t.LOG_LINE, run="r1", host="gpu1", producer="p", seq=1, ts=1.0,
                      data={"tag": "nan", "line": "step 6 loss nan"})  # fmt: skip
    facts = check_facts(fold([line]), now=time.time(), interval_s=1800, files_inspected=[])
    out = render_report(facts)
    assert "no metrics yet" not in out and "`step 6 loss nan`" in out and "metrics.csv" in out
    facts["log_tail"] = ["step 1 loss 2.3"]
    assert "no metrics yet" in render_report(facts)  # a finite line: nothing to say yet


def _anomaly(values: dict[str, object], reason: str) -> Event:
    data = {"rule": "metrics-unreadable", "severity": "warning", "reason": reason, "values": values, "remedy": "r",
            "decision": None, "trigger": "x", "policy": "p", "run_host": "gpu1"}  # fmt: skip
    return make_event(t.ANOMALY_OPENED, run="r1", host="worker", producer="eval/r1", seq=1, ts=1.0, data=data)


def test_slack_says_unreadable_with_the_line_and_every_fix():
    facts = reading.unreadable_facts(62, 61, MADE_UP[5])
    text = messages.notification_text(_anomaly({"status": reading.UNREADABLE}, f"status=unreadable ({facts})"))
    assert text is not None and text.startswith("UNREADABLE r1@gpu1: trainwarden cannot read this run's metrics (")
    assert MADE_UP[5] in text and "status=" not in text and "(metrics-unreadable, warning)" in text
    for fix in (
        "trainwarden.log(...)",
        "Hugging Face or Lightning callback",
        "metrics.csv",
        "tfevents",
        "W&B",
        "docs/agent.md",
    ):
        assert fix in text, fix
    other = messages.notification_text(_anomaly({"loss": 9.0}, "loss=9"))
    assert other is not None and other.startswith("ANOMALY")


def test_health_names_the_fixes_beside_the_agents_notice():
    said = notice_text(f"{reading.NOTICE}r1: no training metric read in 62 lines over 61s")
    assert "r1: no training metric" in said and "trainwarden.log(...)" in said
    assert notice_text("something else") == "something else"

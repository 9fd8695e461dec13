"""W&B first, the log as fallback: which source's metrics go out, and the status transitions."""

import dataclasses

from trainwarden.agent.arbiter import LOG_FALLBACK, SIDECAR, UNREACHABLE, WANDB_OK, Arbiter
from trainwarden.agent.logsource import Item
from trainwarden.agent.wandb_source import Reading, Row
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event


def log_metric(seq: int) -> Item:
    return Item(make_event(t.METRIC, run="r", host="h", producer="h/log/r/g0", seq=seq, data={"step": seq}),
                start=seq - 1, generation=0, is_metric=True)  # fmt: skip


def log_line(seq: int) -> Item:
    return Item(make_event(t.LOG_LINE, run="r", host="h", producer="h/lines/r/g0", seq=seq, data={"tag": "oom"}),
                start=seq - 1, generation=0, is_metric=False)  # fmt: skip


def rows(*pairs: tuple[int, float]) -> list[Row]:
    return [Row("h/wandb/r/d", step + 1, {"loss": 1.0}, ts, step) for step, ts in pairs]


OK = Reading(True, "reading W&B run files in /x", "https://wandb.ai/e/p/runs/r")
GONE = Reading(False, "no W&B run directory found")


def test_wandb_rows_go_out_and_log_metrics_are_held_until_covered():
    a = Arbiter(started=0.0, stale_s=60)
    d = a.step(now=10.0, items=[log_metric(1), log_line(2)], wandb=OK, log_available=True)
    assert d.transition is not None and d.transition.status == WANDB_OK and d.transition.url.endswith("/runs/r")
    assert [i.event.type for i in d.items] == [t.LOG_LINE]  # notable lines are never held
    assert a.held_first is not None
    d = a.step(now=11.0, items=[], wandb=dataclasses.replace(OK, rows=rows((0, 10.5))), log_available=True)
    assert [r.step for r in d.rows] == [0]
    assert a.held_first is None  # the W&B row logged after the line was read covers it


def test_silent_wandb_hands_over_to_the_log_without_losing_the_held_lines():
    a = Arbiter(started=0.0, stale_s=60)
    a.step(now=0.0, items=[log_metric(1)], wandb=OK, log_available=True)
    a.step(now=30.0, items=[log_metric(2)], wandb=OK, log_available=True)
    d = a.step(now=61.0, items=[log_metric(3)], wandb=OK, log_available=True)
    assert d.transition is not None and d.transition.status == LOG_FALLBACK
    assert "W&B has recorded nothing for 60s" in d.transition.reason
    assert [i.event.seq for i in d.items] == [1, 2, 3]


def test_wandb_coming_back_skips_what_the_log_already_sent():
    a = Arbiter(started=0.0)
    a.step(now=5.0, items=[log_metric(1)], wandb=GONE, log_available=True)
    assert a.status == LOG_FALLBACK
    d = a.step(now=6.0, items=[], wandb=dataclasses.replace(OK, rows=rows((0, 4.0), (1, 5.5))),
               log_available=True)  # fmt: skip
    assert d.transition is not None and (d.transition.previous, d.transition.status) == (LOG_FALLBACK, WANDB_OK)
    assert [r.step for r in d.rows] == [1]


def test_unreachable_only_after_the_startup_grace():
    a = Arbiter(started=0.0, startup_grace_s=30)
    assert a.step(now=1.0, items=[], wandb=GONE, log_available=False).transition is None
    d = a.step(now=31.0, items=[], wandb=GONE, log_available=False)
    assert d.transition is not None and d.transition.status == UNREACHABLE
    assert d.transition.reason == "no W&B run directory found; and the log cannot be read"
    d = a.step(now=32.0, items=[log_metric(1)], wandb=GONE, log_available=True)
    assert d.transition is not None and d.transition.status == LOG_FALLBACK
    assert [i.event.seq for i in d.items] == [1]


def test_after_wandb_recorded_the_exit_the_log_is_not_needed():
    a = Arbiter(started=0.0, stale_s=1)
    finished = dataclasses.replace(OK, finished=True)
    a.step(now=0.0, items=[log_metric(1)], wandb=finished, log_available=True)
    d = a.step(now=100.0, items=[log_metric(2)], wandb=finished, log_available=True)
    assert d.transition is None and d.items == [] and a.held_first is None


def test_an_active_sidecar_is_the_source_and_log_metrics_and_wandb_rows_are_dropped():
    a = Arbiter(started=0.0, stale_s=60)
    a.step(now=0.0, items=[log_metric(1)], wandb=OK, log_available=True)  # held for W&B
    d = a.step(now=1.0, items=[log_metric(2), log_line(3)], log_available=True, sidecar=True,
               wandb=dataclasses.replace(OK, rows=rows((0, 0.5))))  # fmt: skip
    assert d.transition is not None and (d.transition.status, d.transition.previous) == (SIDECAR, WANDB_OK)
    assert [i.event.type for i in d.items] == [t.LOG_LINE]  # notable lines still go out; held metrics do not
    assert d.rows == []
    assert a.held_first is None
    d = a.step(now=100.0, items=[log_metric(4)], wandb=GONE, log_available=False, sidecar=True)
    assert d.transition is None and d.items == []  # stays the source, whatever W&B and the log do

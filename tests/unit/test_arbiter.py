"""W&B first, the log as fallback: which source's metrics go out, and the status transitions."""

import dataclasses
from pathlib import Path

from trainwarden.agent.arbiter import LOG, LOG_FALLBACK, SIDECAR, UNREACHABLE, WANDB_OK, Arbiter
from trainwarden.agent.logsource import Item
from trainwarden.agent.wandb_source import Reading, Row
from trainwarden.agent.wandb_use import wandb_use, wandb_variables
from trainwarden.agent.watch import RunWatch
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


def test_a_run_without_wandb_has_the_log_as_its_source_not_as_a_fallback():
    a = Arbiter(started=0.0)
    d = a.step(now=0.0, items=[log_metric(1)], wandb=GONE, log_available=True, uses_wandb=None)
    assert d.transition is None and [i.event.seq for i in d.items] == [1]  # not known yet: lines still go out
    d = a.step(now=0.1, items=[log_metric(2)], wandb=GONE, log_available=True, uses_wandb=False)
    assert d.transition is not None and (d.transition.status, d.transition.previous) == (LOG, None)
    assert [i.event.seq for i in d.items] == [2]
    # it turns out to use W&B (a variable seen later) and none is there: now it is a fallback
    d = a.step(now=5.0, items=[], wandb=GONE, log_available=True, uses_wandb=True)
    assert d.transition is not None and (d.transition.status, d.transition.previous) == (LOG_FALLBACK, LOG)
    d = a.step(now=6.0, items=[], wandb=OK, log_available=True, uses_wandb=True)
    assert d.transition is not None and d.transition.status == WANDB_OK


def test_whether_a_run_uses_wandb():
    plain = RunWatch(run="r", log=Path("/x/train.log"), session="train-r")
    use = wandb_use(plain, run_dir_found=False, env_names=[], env_read=False)
    assert use.uses is None  # its environment is not read yet
    assert wandb_use(plain, run_dir_found=False, env_names=[], env_read=True).uses is False
    assert wandb_use(plain, run_dir_found=True, env_names=[], env_read=False).uses is True
    env = {"WANDB_PROJECT": "lm", "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567", "PATH": "/bin"}
    names = wandb_variables(env)
    assert names == ["WANDB_API_KEY", "WANDB_PROJECT"]
    use = wandb_use(plain, run_dir_found=False, env_names=names, env_read=True)
    assert use.uses is True and "WANDB_PROJECT" in use.why and "0123456789" not in use.why
    told = RunWatch(run="r", log=Path("/x/train.log"), wandb_dir=Path("/x"))
    assert wandb_use(told, run_dir_found=False, env_names=[], env_read=True).uses is True
    off = RunWatch(run="r", log=Path("/x/train.log"), wandb=False)
    assert wandb_use(off, run_dir_found=True, env_names=names, env_read=True).uses is False

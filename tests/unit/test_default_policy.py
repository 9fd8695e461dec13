"""The shipped default policy on realistic sequences: each seed threshold fires on the true
positive, and stays quiet on the near miss next to it."""

import math
import random

import pytest
from trainwarden.events import types as t
from trainwarden.policies.default import default_policy

from tests.policy_helpers import Clock, policy, run, summary

POLICY = default_policy()
MIN = 60.0


def healthy(c: Clock, steps: int, *, start: float = 0.0, every: float = 30.0, seed: int = 1, **extra):
    """A training curve: loss decaying with noise, lr warming up then decaying, steady throughput."""
    rnd = random.Random(seed)
    out = []
    for i in range(steps):
        step = (i + 1) * 10
        loss = 1.0 + 3.0 * math.exp(-step / 500) + rnd.uniform(-0.03, 0.03)
        lr = 3e-4 * min(1.0, step / 100) * (1 - step / 100_000)
        data = {"step": step, "loss": loss, "lr": lr, "grad_norm": rnd.uniform(0.5, 2.0),
                "tokens_per_s": 12000 + rnd.uniform(-300, 300), **extra}  # fmt: skip
        out.append(c.metric(start + i * every, **data))
    return out


def fired(events):
    return summary(run(POLICY, events))


def test_a_healthy_run_only_continues():
    c = Clock()
    events = [c.event(t.RUN_LAUNCHED, 0)]
    events += healthy(c, 200)
    for i in range(0, 100 * 60, 60):  # GPU samples every minute, busy and cool
        events.append(c.event(t.GPU, i, util=95, temp=70))
    events.sort(key=lambda e: e.ts)
    assert fired(events) == ["CONTINUE"]


def test_loss_nan_stops_at_once():
    c = Clock()
    events = [*healthy(c, 20), c.metric(20 * 30, step=210, loss=math.nan)]
    out = run(POLICY, events)
    assert summary(out)[-2:] == ["opened:loss-nonfinite", "STOP:loss-nonfinite"]
    assert out[-1][1]["reason"] == "loss=nan at step 210"


@pytest.mark.parametrize(("spiked", "expected"), [
    (1, ["CONTINUE"]),  # one batch 3.5x its trailing mean, then back: a noisy batch, not worth a message
    (3, ["CONTINUE", "opened:loss-spike", "resolved:loss-spike"]),  # recovers within its window: no STOP
    # persists: STOP, by loss-runaway (3.5x the run's best on 3 samples in a row; loss-spike is a warning)
    (6, ["CONTINUE", "opened:loss-spike", "opened:loss-runaway", "STOP:loss-runaway", "resolved:loss-spike",
         "resolved:loss-runaway"]),
])  # fmt: skip
def test_loss_spike_is_an_anomaly_and_a_stop_only_if_it_persists(spiked, expected):
    c = Clock()
    events = healthy(c, 400)
    base = events[-1].data["loss"]
    at = events[-1].ts - 1_800_000_000.0
    events += [c.metric(at + 30 * (i + 1), step=5000 + i, loss=base * 3.5) for i in range(spiked)]
    events += [c.metric(at + 30 * (spiked + 1 + i), step=6000 + i, loss=base) for i in range(3)]
    assert fired(events) == expected


def test_loss_at_1_9x_its_average_is_no_spike():
    c = Clock()
    events = healthy(c, 400)
    events.append(c.metric(400 * 30, step=9999, loss=events[-1].data["loss"] * 1.9))
    assert fired(events) == ["CONTINUE"]


@pytest.mark.parametrize(("grad_norm", "loss", "expected"), [
    (150.0, 3.0, ["opened:grad-norm-high"]),
    (99.0, 3.0, ["opened:grad-norm-high"]),  # under 100, but 50-200x its trailing mean (0.5-2)
    (math.nan, 3.0, []),  # beside a finite loss: one step skipped by the fp16 loss scaler, no page
    (math.nan, 0.0, ["opened:grad-norm-nonfinite", "STOP:grad-norm-nonfinite"]),  # beside a loss of 0: broken
    (1.5, 3.0, []),
])  # fmt: skip
def test_grad_norm_above_100_nan_or_far_above_its_median_is_an_anomaly(grad_norm, loss, expected):
    c = Clock()
    events = [*healthy(c, 5), c.metric(200, step=60, loss=loss, grad_norm=grad_norm)]
    assert fired(events)[1:] == expected


@pytest.mark.parametrize(("minutes", "expected"), [(31, ["opened:gpu-util-low"]), (29, [])])
def test_gpu_util_below_40_for_30_minutes(minutes, expected):
    c = Clock()
    events = [c.event(t.RUN_LAUNCHED, 0), c.event(t.GPU, 0, util=90)]
    events += [c.event(t.GPU, 40 * MIN + i * MIN, util=35) for i in range(minutes + 1)]
    events += healthy(c, (40 + minutes) * 2 + 1)
    events.sort(key=lambda e: e.ts)
    assert fired(events) == ["CONTINUE", *expected]


@pytest.mark.parametrize(("minutes", "expected"), [(6, ["opened:gpu-temp-high"]), (4, [])])
def test_gpu_temp_above_83_for_5_minutes(minutes, expected):
    c = Clock()
    events = [c.event(t.GPU, 40 * MIN + i * MIN, util=95, temp=85) for i in range(minutes + 1)]
    events += healthy(c, (40 + minutes) * 2 + 1)
    events.sort(key=lambda e: e.ts)
    assert fired(events) == ["CONTINUE", *expected]


def test_val_loss_rising_three_evals_in_a_row_stops_early_and_two_does_not():
    c = Clock()
    evals = [2.0, 1.9, 1.8, 1.85, 1.9, 1.95]
    events = [c.metric(i * 600, step=i * 1000, val_loss=v) for i, v in enumerate(evals)]
    out = run(POLICY, events)
    assert summary(out)[-2:] == ["opened:val-rising", "STOP:val-rising"]
    assert out[-1][1]["reason"].startswith("val_loss rose 3 evals in a row (1.8 -> 1.85 -> 1.9 -> 1.95)")
    c = Clock()
    dip = [2.0, 1.9, 1.8, 1.85, 1.9, 1.88, 1.95]
    assert "STOP:val-rising" not in fired([c.metric(i * 600, step=i * 1000, val_loss=v) for i, v in enumerate(dip)])


def test_ppl_counts_as_the_eval_metric_too():
    c = Clock()
    events = [c.metric(i * 600, step=i, **{"eval/perplexity": v}) for i, v in enumerate([9.0, 9.5, 10.0, 11.0])]
    assert fired(events)[-1] == "STOP:val-rising"


def test_val_rising_while_train_falls_is_overfitting():
    c = Clock()
    events = []
    train = 2.0
    for k, val in enumerate([1.8, 1.7, 1.75, 1.8]):
        for j in range(5):
            train -= 0.01
            events.append(c.metric(k * 600 + j * 60, step=k * 100 + j, loss=train))
        events.append(c.metric(k * 600 + 300, step=k * 100 + 50, val_loss=val))
    assert "opened:overfitting" in fired(events)
    c = Clock()  # both rising: not overfitting (and not yet three rises)
    both = [c.metric(i * 600, step=i, loss=1.0 + i / 10, val_loss=1.0 + i / 10) for i in range(3)]
    assert "opened:overfitting" not in fired(both)


def test_tokens_per_second_halved_for_five_minutes_is_a_throughput_drop():
    c = Clock()
    events = healthy(c, 30)
    events += [c.metric(1000 + i * 30, step=400 + i, loss=1.5, tokens_per_s=5000.0) for i in range(11)]
    out = run(POLICY, events)
    assert summary(out)[-1] == "opened:throughput-drop"
    assert out[-1][1]["reason"].startswith("throughput fell to 42% of its recent level (tokens_per_s ")
    assert "for 5m" in out[-1][1]["reason"] and "DataLoader workers" in out[-1][1]["remedy"]
    c = Clock()  # halved for 4m30s only (an eval, a save, a slow shard): quiet
    dip = healthy(c, 30) + [c.metric(1000 + i * 30, step=400 + i, loss=1.5, tokens_per_s=5000.0) for i in range(10)]
    assert fired(dip) == ["CONTINUE"]


@pytest.mark.parametrize(("line", "rule", "remedy"), [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "log-oom", "reduce the batch size"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'data/train.bin'", "log-file-not-found",
     "fix the path and restart"),
    ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error", "log-nccl", "NCCL_"),
    ("Traceback (most recent call last):", "log-traceback", "lower the learning rate"),
])  # fmt: skip
def test_log_lines_open_anomalies_with_their_remedy(line, rule, remedy):
    c = Clock()
    out = run(POLICY, [c.log(0, line)])
    assert [d["rule"] for typ, d in out if typ == t.ANOMALY_OPENED] == [rule]
    assert remedy in out[0][1]["remedy"]
    assert not any(typ == t.DECISION and d["decision"] == t.STOP for typ, d in out)


def test_a_log_anomaly_clears_when_training_goes_on():
    c = Clock()
    out = run(POLICY, [c.metric(0, step=1, loss=2.1), c.log(10, "Traceback (most recent call last):"),
                       c.metric(30, step=2, loss=2.0)])  # fmt: skip
    assert summary(out) == ["CONTINUE", "opened:log-traceback", "resolved:log-traceback"]
    # a fault before any step: one loss after it is no proof (a bar's last redraw as the process dies), three are
    c = Clock()
    losses = [c.metric(30 + i, step=2 + i, loss=2.0) for i in range(3)]
    out = run(POLICY, [c.log(0, "Traceback (most recent call last):"), *losses])
    assert summary(out) == ["opened:log-traceback", "CONTINUE", "resolved:log-traceback"]


def test_a_silent_run_waits_and_never_stops():
    c = Clock()
    events = [*healthy(c, 60), c.tick(60 * 30 + 14 * MIN), c.tick(60 * 30 + 16 * MIN)]
    out = run(POLICY, events)
    said = summary(out)
    assert said[-3:] == ["opened:run-stalled", "WAIT:run-stalled", "opened:run-silent"]  # stalled at the 1st tick
    assert out[-1][1]["reason"].startswith("no metric for 16m")
    assert not [s for s in said if s.startswith("STOP")]


def test_unreachable_data_source_waits_and_never_stops():
    c = Clock()
    events = [*healthy(c, 5), c.event(t.SOURCE_STATUS, 200, status="unreachable", reason="wandb api timeout")]
    events += [c.event(t.SOURCE_STATUS, 200 + i * 900, status="unreachable") for i in range(1, 10)]
    out = run(POLICY, events)
    decisions = [d for typ, d in out if typ == t.DECISION]
    assert [d["decision"] for d in decisions] == [t.CONTINUE, t.WAIT]
    assert decisions[1]["reason"] == "status=unreachable (wandb api timeout) at step 50"


def test_startup_checks():
    c = Clock()
    # launched, but no loss and an idle GPU for the first minutes
    events = [c.event(t.RUN_LAUNCHED, 0), c.event(t.SOURCE_STATUS, 30, source="metrics", status="log_fallback")]
    events += [c.event(t.GPU, i * MIN, util=0) for i in range(7)]
    events += [c.tick(11 * MIN), c.event(t.HEALTH, 12 * MIN, alive=False)]
    opened = [s for s in fired(events) if s.startswith("opened")]
    # no loss at 10 minutes is no alert of its own any more: run-stalled says "no first training step" at 20
    assert opened == ["opened:wandb-not-connected", "opened:gpu-idle-at-start", "opened:process-dead"]


def test_startup_checks_pass_for_a_run_that_starts_well():
    c = Clock()
    events = [c.event(t.RUN_LAUNCHED, 0), c.event(t.SOURCE_STATUS, 30, status="wandb_ok"),
              c.event(t.HEALTH, 40, alive=True)]  # fmt: skip
    events += [c.event(t.GPU, i * MIN, util=0 if i < 2 else 90) for i in range(12)]
    events += healthy(c, 30, start=60)
    events.sort(key=lambda e: e.ts)
    assert fired(events) == ["CONTINUE"]


def test_lr_rising_while_the_schedule_decays():
    c = Clock()
    lrs = [1e-4, 2e-4, 3e-4, 2.9e-4, 2.8e-4, 2.7e-4]
    events = [c.metric(i * 30, step=i, lr=v) for i, v in enumerate(lrs)]
    assert fired(events) == ["CONTINUE"]  # warmup then decay
    events.append(c.metric(300, step=7, lr=3.5e-4))
    assert fired(events)[-1] == "opened:lr-schedule"


def test_eval_worse_than_the_expected_baseline():
    c = Clock()
    launched = c.event(t.RUN_LAUNCHED, 0, config={"baseline": {"val_loss": 2.0}})
    late = 40 * MIN
    worse = [launched, c.metric(late, step=1, val_loss=2.3)]
    out = run(POLICY, worse)
    assert summary(out) == ["opened:worse-than-baseline", "CONTINUE"]
    assert "is worse vs the expected baseline 2" in out[0][1]["reason"]
    c = Clock()
    flat = [c.event(t.RUN_LAUNCHED, 0, config={"baseline": {"val_loss": 2.0}}), c.metric(late, step=1, val_loss=2.05)]
    assert fired(flat) == ["CONTINUE"]


def test_val_plateau():
    c = Clock()
    late = 40 * MIN
    flat = [c.metric(late + i * 600, step=i, val_loss=1.5 + (0.0001 if i % 2 else 0)) for i in range(10)]
    assert "opened:val-plateau" in fired(flat)
    c = Clock()
    improving = [c.metric(late + i * 600, step=i, val_loss=2.0 - i * 0.05) for i in range(10)]
    assert "opened:val-plateau" not in fired(improving)


def test_a_run_that_fails_opens_an_anomaly_unless_someone_stopped_it():
    c = Clock()
    failed = [c.event(t.RUN_LAUNCHED, 0), *healthy(c, 5), c.event(t.RUN_FAILED, 200, exit_code=3)]
    assert fired(failed)[-1] == "opened:run-failed"
    stopped = [c.event(t.RUN_LAUNCHED, 0), *healthy(c, 5), c.event(t.STOP_REQUESTED, 190, by="slack", user="U1"),
               c.event(t.RUN_FAILED, 200, exit_code=130)]  # fmt: skip
    assert fired(stopped) == ["CONTINUE"]
    finished = [c.event(t.RUN_LAUNCHED, 0), *healthy(c, 5), c.event(t.RUN_FINISHED, 200, exit_code=0)]
    assert fired(finished) == ["CONTINUE"]


def test_after_the_policy_stopped_a_run_its_end_is_not_another_anomaly():
    c = Clock()
    events = [*healthy(c, 5), c.metric(200, step=60, loss=math.nan), c.event(t.RUN_FAILED, 210, exit_code=130)]
    assert fired(events)[-2:] == ["opened:loss-nonfinite", "STOP:loss-nonfinite"]


def test_the_w_and_b_guard_at_run_time():
    c = Clock()
    events = [c.event(t.RUN_LAUNCHED, 0), *healthy(c, 3),
              c.event(t.HEALTH, 100, check="wandb_mode", ok=False, wandb_mode="offline")]  # fmt: skip
    out = run(POLICY, events)
    assert summary(out)[-2:] == ["opened:wandb-offline", "STOP:wandb-offline"]  # an offline run is invalid
    (stop,) = [data for typ, data in out if typ == t.DECISION and data["decision"] == "STOP"]
    assert stop["confirm_s"] == 600  # a guarded stop: a person may keep it running
    later = [*events, *healthy(c, 3, start=200), c.event(t.HEALTH, 300, alive=True, pid=4)]
    assert fired(later)[-1] == "STOP:wandb-offline"  # a later health sample without the guard's field is no cure
    fine = [c.event(t.RUN_LAUNCHED, 0), *healthy(c, 3), c.event(t.HEALTH, 100, alive=True, pid=4)]
    assert fired(fine) == ["CONTINUE"]


def test_a_late_end_of_an_earlier_launch_does_not_end_the_new_one():
    """Relaunch race: the agent reports the old launch's end after the new run.launched is recorded."""
    from trainwarden.events.envelope import make_event
    from trainwarden.events.projection import fold

    c = Clock()
    first = c.event(t.RUN_LAUNCHED, 0)
    relaunch = make_event(t.RUN_LAUNCHED, run=first.run, host="gpu1", producer="launch/x", seq=first.seq + 1000,
                          ts=100.0)  # fmt: skip
    late_end = make_event(t.RUN_FAILED, run=first.run, host="gpu1", producer=f"exit/{first.run}", seq=first.seq,
                          data={"exit_code": 130, "launch": first.seq}, ts=101.0)  # fmt: skip
    events = [first, *healthy(c, 2), relaunch, late_end, *healthy(c, 2, start=110), c.metric(200, loss=math.nan)]
    assert fired(events)[-2:] == ["opened:loss-nonfinite", "STOP:loss-nonfinite"]
    assert fold(events).status == "running"
    own_end = make_event(t.RUN_FAILED, run=first.run, host="gpu1", producer=f"exit/{first.run}", seq=relaunch.seq,
                         data={"exit_code": 1, "launch": relaunch.seq}, ts=300.0)  # fmt: skip
    assert fold([*events, own_end]).status == "failed"


def test_another_sources_status_neither_resolves_nor_reopens_wandb_not_connected():
    """The agent re-announces its GPU sampling (`nvml`) at each restart: W&B is still not connected."""
    c = Clock()
    events = [c.event(t.RUN_LAUNCHED, 0), c.event(t.SOURCE_STATUS, 30, source="metrics", status="log_fallback")]
    for restart in range(3):  # each agent restart: GPU sampling, then the metrics source, announced again
        events.append(c.event(t.SOURCE_STATUS, 60 + restart * 30, source="nvml", status="unavailable"))
        events.append(c.event(t.SOURCE_STATUS, 61 + restart * 30, source="metrics", status="log_fallback"))
    assert [s for s in fired(events) if "wandb" in s] == ["opened:wandb-not-connected"]
    events.append(c.event(t.SOURCE_STATUS, 200, source="metrics", status="wandb_ok"))
    assert [s for s in fired(events) if "wandb" in s] == ["opened:wandb-not-connected", "resolved:wandb-not-connected"]


def test_a_status_rule_without_a_source_is_resolved_only_by_the_source_that_opened_it():
    pol = policy("""
      - id: wandb-down
        kind: status
        event: source.status
        values: [log_fallback]
    """)
    c = Clock()
    events = [c.event(t.SOURCE_STATUS, 10, source="metrics", status="log_fallback"),
              c.event(t.SOURCE_STATUS, 20, source="nvml", status="unavailable"),
              c.event(t.SOURCE_STATUS, 30, source="metrics", status="log_fallback")]  # fmt: skip
    assert [s for s in summary(run(pol, events)) if "wandb" in s] == ["opened:wandb-down"]
    events.append(c.event(t.SOURCE_STATUS, 40, source="metrics", status="wandb_ok"))
    assert [s for s in summary(run(pol, events)) if "wandb" in s] == ["opened:wandb-down", "resolved:wandb-down"]


def test_a_run_that_vanished_without_an_exit_code_reads_as_unknown_never_none():
    c = Clock()
    events = [*healthy(c, 3), c.event(t.RUN_FAILED, 200, exit_code=None, reason="the tmux session is gone")]
    reasons = [d["reason"] for typ, d in run(POLICY, events) if typ in (t.DECISION, t.ANOMALY_OPENED) and "reason" in d]
    assert any("exit_code=unknown (the tmux session is gone)" in r for r in reasons), reasons
    assert not any("None" in r for r in reasons), reasons


def test_a_fault_line_in_the_wake_of_a_policy_stop_is_the_stops_and_opens_nothing():
    c = Clock()
    ctrl_c = 'Traceback (most recent call last):\n  File "train.py", line 9\nKeyboardInterrupt'
    asked = [c.metric(0, step=1, loss=2.1), c.event(t.STOP_REQUESTED, 10, by="policy", reason="loss exploded")]
    assert summary(run(POLICY, [*asked, c.log(12, ctrl_c, tag="traceback")])) == ["CONTINUE"]
    # before the stop was asked, or long after it (a stop that failed, a run going on): a fault as ever
    c = Clock()
    early = [c.metric(0, step=1, loss=2.1), c.log(9, ctrl_c, tag="traceback"),
             c.event(t.STOP_REQUESTED, 10, by="policy")]  # fmt: skip
    assert summary(run(POLICY, early)) == ["CONTINUE", "opened:log-traceback"]
    c = Clock()
    late = [*asked[:1], c.event(t.STOP_REQUESTED, 10, by="policy"), c.log(10 + 61, ctrl_c, tag="traceback")]
    assert summary(run(POLICY, late)) == ["CONTINUE", "opened:log-traceback"]

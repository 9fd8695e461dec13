"""Phases and waits counted in the run's progress (`500 steps`, `3 evals`) decide the same whatever the clock:
a backtest (no clock: a fake 10 s per metric line) and a live run (minutes per line) agree.

Real runs from tests/data/real: nanoGPT's fp16 run whose loss turns NaN at iter 3010 (MANIFEST: STOP) and
the Whisper fine-tune's trainer_state.json (eval every 1000 steps).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from trainwarden.events import types as t
from trainwarden.policies.durations import Persistence, Span, parse_persistence, parse_span
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.loader import load_policy

from tests.policy_helpers import Clock, policy, run, summary
from tests.unit.test_policy_primary import whisper_events
from trainwarden.cli.policy import log_events

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
STEADY_NAN = "  - {id: nan, kind: nonfinite, metric: loss, decision: STOP, phase: steady}\n"


@pytest.mark.parametrize(
    ("text", "span"),
    [("500 steps", Span(steps=500)), ("1 step", Span(steps=1)), ("3 evals", Span(evals=3)), ("30m", Span(seconds=1800)),
     ("3 samples", None), ("steps", None), ("-3 steps", None), ("3 epochs", None)],
)  # fmt: skip
def test_a_span_is_a_duration_or_progress(text, span):
    assert parse_span(text) == span


@pytest.mark.parametrize(
    ("value", "persist"),
    [(3, Persistence(samples=3)), ("3 samples", Persistence(samples=3)), ("200 steps", Persistence(steps=200)),
     ("2 evals", Persistence(evals=2)), ("10m", Persistence(seconds=600)), ("0 evals", None)],
)  # fmt: skip
def test_for_accepts_samples_durations_steps_and_evals(value, persist):
    assert parse_persistence(value) == persist
    if persist is not None:
        assert Persistence(**dataclasses.asdict(persist)).describe() in (str(value), f"{value} samples")


def test_a_phase_in_samples_is_refused_saying_what_is_accepted():
    with pytest.raises(PolicyError) as info:
        policy(STEADY_NAN, startup="'3 samples'")
    assert "'500 steps' or '3 evals'" in str(info.value)


def _nanogpt(tmp_path: Path, interval: float) -> list:
    """The real lines, less the `2023-03-22 09:32:52 ` timestamp the user's shell put before nanoGPT's own."""
    lines = (REAL / "nanogpt_fp16_v100_loss_nan.log").read_text().splitlines()
    path = tmp_path / "train.log"
    path.write_text("".join(line.split(" ", 2)[-1] + "\n" for line in lines))
    return list(log_events(path, interval=interval))


@pytest.mark.parametrize(("startup", "stops"), [("'50 steps'", True), ("'200 steps'", False)])
def test_a_phase_in_steps_decides_alike_in_a_backtest_and_a_live_run(tmp_path, startup, stops):
    """The run starts at iter 2920 and turns NaN at iter 3010: 90 steps in."""
    pol = policy(STEADY_NAN, startup=startup)
    backtest, live = _nanogpt(tmp_path, 10), _nanogpt(tmp_path, 600)
    assert ("STOP:nan" in summary(run(pol, backtest))) is stops
    assert ("STOP:nan" in summary(run(pol, live))) is stops


def test_a_phase_in_time_differs_between_backtest_and_live(tmp_path):
    """The test above can fail: with `startup: 30m` the backtest's NaN (100 s in) falls in the startup phase
    and the live run's (an hour in) in the steady one."""
    pol = policy(STEADY_NAN, startup="30m")
    assert "STOP:nan" not in summary(run(pol, _nanogpt(tmp_path, 10)))
    assert "STOP:nan" in summary(run(pol, _nanogpt(tmp_path, 600)))


@pytest.mark.parametrize("seconds_per_line", [10, 900])
def test_for_n_evals_counts_evals_not_lines(seconds_per_line):
    """Whisper's eval loss: 0.307, 0.356, 0.421, 0.452, 0.468 (evals every 1000 steps, 40 train lines apart).
    Above 0.4 from the third eval on: `for: 2 evals` opens at the fourth, whatever the clock."""
    c = Clock()
    events = [dataclasses.replace(e, ts=e.ts * seconds_per_line / 10) for e in whisper_events(c)]
    pol = policy("  - {id: high, kind: threshold, metric: val_loss, above: 0.4, for: 2 evals}\n")
    state_out = run(pol, events)
    (opened,) = [d for typ, d in state_out if typ == t.ANOMALY_OPENED]
    assert opened["values"] == {"val_loss": pytest.approx(0.4519, abs=1e-4), "step": 4000}
    assert "for 2 evals" in opened["reason"]


@pytest.mark.parametrize(("evals", "step"), [(2, 2000), (4, 4000)])
def test_startup_in_evals_ends_at_the_nth_eval(evals, step):
    """Whisper's WER is above 30 at every eval: a startup rule opens at the first, a steady one at the Nth."""
    pol = load_policy(f"name: p\nstartup: {evals} evals\nrules:\n"
                      "  - {id: early, kind: threshold, metric: val_wer, above: 30, phase: startup}\n"
                      "  - {id: later, kind: threshold, metric: val_wer, above: 30, phase: steady}\n",
                      source="p.yaml")  # fmt: skip
    opened = {d["rule"]: d["values"]["step"] for typ, d in run(pol, whisper_events(Clock())) if typ == t.ANOMALY_OPENED}
    assert opened == {"early": 1000, "later": step}


def test_cooldown_in_steps():
    """A loss threshold with `cooldown: 300 steps`: a second crossing 200 steps after the first resolved does not
    open again; one 400 steps after does."""
    c = Clock()
    losses = {100: 5.0, 200: 1.0, 400: 5.0, 500: 1.0, 900: 5.0}
    events = [c.metric(i * 10, step=s, loss=v) for i, (s, v) in enumerate(losses.items())]
    out = summary(run(policy("  - {id: hi, kind: threshold, metric: loss, above: 4, cooldown: 300 steps}\n"), events))
    assert out.count("opened:hi") == 2

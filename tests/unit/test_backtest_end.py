"""A backtest's "before the run's end": the end is the STOP's launch's last activity, not the agent's heartbeats
after it, nor a later launch of the same name."""

from __future__ import annotations

import math

from trainwarden.events import types as t
from trainwarden.policies.backtest import backtest

from tests.policy_helpers import Clock, policy

RULES = ("  - {id: nan, kind: nonfinite, metric: loss, decision: STOP, severity: critical}\n"
         "  - {id: agent-silent, kind: absence, event: agent.heartbeat, duration: 90s}\n")  # fmt: skip


def launch(c: Clock, at: float, *, loss_at_3: float) -> list:
    """Launched, steps 1..5 every 10 s (step 3's loss as given), then its end at +60 s."""
    losses = [2.0, 1.9, loss_at_3, 1.8, 1.7]
    out = [c.event(t.RUN_LAUNCHED, at, session="s", attempt=1)]
    out += [c.metric(at + 10 * (i + 1), step=i + 1, loss=v) for i, v in enumerate(losses)]
    return [*out, c.event(t.RUN_FAILED, at + 60, exit_code=1, launch=out[0].seq)]


def test_heartbeats_after_the_runs_end_do_not_lengthen_it():
    c = Clock()
    events = [*launch(c, 0, loss_at_3=math.nan), *(c.event(t.AGENT_HEARTBEAT, 60 + 30 * i) for i in range(1, 21))]
    result = backtest(policy(RULES), events)
    assert result.stop is not None and result.stop.step == 3
    steps, minutes, gpu_hours = result.saved(gpus=8) or (None, 0.0, 0.0)
    assert (steps, minutes) == (2, 0.5)  # STOP at +30 s, the run's end at +60 s; not ten minutes of heartbeats
    assert math.isclose(gpu_hours, 0.5 / 60 * 8)
    assert result.last_ts is not None and result.last_ts - (result.first_ts or 0) == 60.0  # its span: its activity


def test_a_later_launch_of_the_name_is_not_what_the_stop_would_have_saved():
    c = Clock()
    events = [*launch(c, 0, loss_at_3=math.nan), *launch(c, 3600, loss_at_3=1.85)]
    result = backtest(policy(RULES), events)
    assert [m.what for m in result.timeline].count("STOP") == 1
    assert result.saved() == (2, 0.5, 0.5 / 60)  # the first launch's end, an hour before the second's

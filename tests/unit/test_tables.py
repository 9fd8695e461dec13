"""Metrics printed as tables over several lines (agent/tables.py): stable-baselines3's logger box and fastai's
console table (fastprogress), on output the real libraries printed (tests/data/logs/captured), and the lines
that look like a table but are not one."""

from __future__ import annotations

import math

from trainwarden.agent.reading import MetricReader
from trainwarden.agent.tables import Tables

from tests.unit.test_formats_captured import metrics_of


def test_a_stable_baselines3_box_is_one_sample_at_its_closing_rule():
    got = metrics_of("sb3_ppo_nan_reward.log")
    # one sample per box, at `total_timesteps`, until the NaN crash; none for the rules or the rows. The first box
    # (no training yet: rollout and time values only, no name the vocabulary knows) is a shape seen once: left out
    assert [m["step"] for m in got] == [64 * i for i in range(2, 11)]
    assert got[0]["loss"] == 52.8 and got[0]["value_loss"] == 112 and got[0]["lr"] == 0.0003  # the `train/` group
    assert got[0]["rollout/ep_rew_mean"] == 30


def test_a_fastai_table_row_is_read_under_its_header():
    got = metrics_of("fastprogress_table_nan.log")
    assert [m["epoch"] for m in got] == list(range(12))
    assert got[0]["loss"] == 0.733132 and got[0]["val_loss"] == 0.670039 and got[0]["accuracy"] == 0.59375
    assert math.isnan(got[3]["loss"]) and math.isnan(got[3]["val_loss"])
    assert all("time" not in m for m in got)  # `00:00` is a clock, left out


def test_a_box_row_outside_a_box_and_a_broken_box_give_nothing():
    t = Tables()
    assert t.read("| loss | 0.5 |") == {}  # a markdown table row: no box open
    t.read("-" * 20)
    t.read("| loss | 0.5 |")
    assert t.read("some other line") == {}  # the box ends unread
    assert t.read("-" * 20) == {}  # that rule opens a new box, it closes nothing


def test_prose_and_a_row_of_the_wrong_width_are_no_table():
    t = Tables()
    assert t.read("computing the loss of the model") == {}
    assert t.read("1 2 3 4 5 6") == {}  # no header was taken from the prose line
    t.read("epoch  train_loss  valid_loss")
    assert t.read("1  0.5") == {}  # two cells under three names
    assert t.read("1  0.5  nope") == {}  # a word where a number belongs
    assert t.read("1  0.5  0.6") == {"epoch": 1, "train_loss": 0.5, "valid_loss": 0.6}


def test_a_line_the_one_line_formats_read_is_never_taken_for_a_row():
    r = MetricReader()
    r.read("step  loss  acc")
    got, _ = r.read("step 3 loss 0.5")  # read as pairs, not as a row under the header
    assert got == {"step": 3, "loss": 0.5}

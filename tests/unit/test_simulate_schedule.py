"""`trainwarden simulate`'s pure part: names, shards, NaN choice, the schedule, option checks."""

import math

import pytest
from trainwarden.core.errors import UsageError

from trainwarden.tools.simulate import (
    SimSpec,
    due,
    metric_data,
    nan_indices,
    nan_onsets,
    shard_host,
    shard_runs,
    validate,
)


def test_due_counts_events_on_an_even_schedule():
    # 4 runs at 2 Hz: event g is due at g / 8 s
    assert due(-0.1, runs=4, rate_hz=2, total=None) == 0
    assert due(0.0, runs=4, rate_hz=2, total=None) == 1
    assert due(0.124, runs=4, rate_hz=2, total=None) == 1
    assert due(0.125, runs=4, rate_hz=2, total=None) == 2
    assert due(1.0, runs=4, rate_hz=2, total=None) == 9
    assert due(100.0, runs=4, rate_hz=2, total=12) == 12


def test_shards_split_the_runs_and_name_their_hosts():
    spec = SimSpec(runs=5, rate_hz=1, processes=2, prefix="x", host="h")
    assert shard_runs(spec, 0) == ["x-00000", "x-00002", "x-00004"]
    assert shard_runs(spec, 1) == ["x-00001", "x-00003"]
    assert [shard_host(spec, i) for i in range(2)] == ["h-p0", "h-p1"]
    assert shard_host(SimSpec(runs=5, rate_hz=1, host="h"), 0) == "h"


def test_nan_runs_are_the_asked_share_spread_evenly():
    assert nan_indices(10, 0.0) == []
    assert nan_indices(10, 0.2) == [4, 9]
    assert len(nan_indices(1000, 0.02)) == 20
    assert nan_indices(3, 1.0) == [0, 1, 2]
    spec = SimSpec(runs=10, rate_hz=1, duration_s=20, nan_fraction=0.2, nan_spread_s=4)
    assert nan_onsets(spec) == {"sim-00004": 10.0, "sim-00009": 12.0}  # half the duration, then spread


def test_metric_data_looks_like_a_parsed_training_line():
    healthy = metric_data(7, nan=False)
    assert set(healthy) == {"step", "loss", "lr", "grad_norm", "tokens_per_s"}
    assert healthy["step"] == 7 and math.isfinite(healthy["loss"])
    assert math.isnan(metric_data(7, nan=True)["loss"])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (SimSpec(runs=0, rate_hz=1), "--runs must be at least 1"),
        (SimSpec(runs=1, rate_hz=0), "--rate must be a positive"),
        (SimSpec(runs=1, rate_hz=1, duration_s=0.2), "less than one event per run"),
        (SimSpec(runs=2, rate_hz=1, processes=3), "--processes must be between 1 and --runs (2)"),
        (SimSpec(runs=2, rate_hz=1, nan_fraction=1.5), "--nan-fraction must be between 0 and 1"),
        (SimSpec(runs=2, rate_hz=1, prefix="bad name"), "--prefix / --host"),
    ],
)
def test_invalid_options_say_which(spec, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate(spec)

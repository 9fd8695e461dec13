"""The one metric-name vocabulary: each spelling names one metric, the agent and the policies read it
the same way, and training perplexity never passes for validation perplexity."""

from __future__ import annotations

from collections import Counter

import pytest
from trainwarden.agent.formats import parse_metrics
from trainwarden.core.metrics import (
    METRICS,
    SYSTEM,
    TRAINING,
    VALIDATION,
    canonical,
    first_of,
    fold,
    normalise,
    spellings,
)
from trainwarden.policies.default import default_policy
from trainwarden.policies.names import expand

from tests.policy_helpers import Clock, run, summary

POLICY = default_policy()
RISING = [9.0, 9.5, 10.0, 11.0, 12.0]  # up 4 evals in a row: the default val-rising rule needs 3


def test_every_name_and_spelling_belongs_to_one_metric():
    names = [m.name for m in METRICS]
    assert len(names) == len(set(names))
    every = [s for m in METRICS for s in (m.name, *m.spellings)]
    assert [s for s, n in Counter(every).items() if n > 1] == []
    # the agent compares names folded (case, ' ', '-', '.'): no two metrics may meet there either
    owners: dict[str, set[str]] = {}
    for m in METRICS:
        for s in (m.name, *m.spellings):
            owners.setdefault(fold(s), set()).add(m.name)
    assert {k: v for k, v in owners.items() if len(v) > 1} == {}


@pytest.mark.parametrize("metric", [m for m in METRICS if m.phase is not SYSTEM], ids=lambda m: m.name)
def test_the_agent_maps_every_spelling_to_its_own_metric(metric):
    assert {s: canonical(s) for s in metric.spellings} == {s: metric.name for s in metric.spellings}
    assert canonical(metric.name) == metric.name


def test_validation_metrics_are_named_val_and_training_spellings_never_map_there():
    for m in METRICS:
        assert m.name.startswith("val_") == (m.phase is VALIDATION), m.name
        if m.phase is TRAINING:
            assert not any(canonical(s).startswith("val_") for s in (m.name, *m.spellings)), m.name


@pytest.mark.parametrize("printed", ["ppl", "perplexity", "train/ppl", "train_perplexity", "Train/Perplexity"])
def test_training_perplexity_is_ppl_not_val_ppl(printed):
    assert canonical(printed) == "ppl"
    assert printed not in expand(["val_ppl"])


def test_train_loss_is_not_val_loss():
    assert "loss" not in expand(["val_loss"]) and "train/loss" not in expand(["val_loss"])
    assert "val_loss" not in expand(["loss"])


def test_spellings_start_with_the_canonical_name_and_unknown_names_stand_alone():
    assert spellings("val_ppl")[0] == "val_ppl" and "eval/perplexity" in spellings("val_ppl")
    assert spellings("my/metric") == ("my/metric",)
    assert first_of({"train/loss": 2.5}, "loss") == 2.5
    assert first_of({"val_loss": 2.5}, "loss") is None


def test_one_line_keeps_training_and_validation_perplexity_apart():
    assert normalise({"perplexity": 9.0, "train/ppl": 9.1}) == {"ppl": 9.0, "train/ppl": 9.1}
    assert normalise({"perplexity": 9.0, "eval/ppl": 8.0}) == {"ppl": 9.0, "val_ppl": 8.0}


def _decisions(events) -> list[str]:
    return [s for s in summary(run(POLICY, events)) if s.split(":")[0] in ("STOP", "WAIT", "CONTINUE")]


@pytest.mark.parametrize("printed", ["perplexity", "ppl", "train/ppl", "train/perplexity", "train_ppl"])
def test_rising_training_perplexity_does_not_stop_a_run(printed):
    c = Clock()
    events = [c.metric(i * 600, step=i * 1000, **{printed: v}) for i, v in enumerate(RISING)]
    assert "STOP:val-rising" not in summary(run(POLICY, events))
    assert not [d for d in _decisions(events) if d.startswith("STOP")]


@pytest.mark.parametrize("printed", ["val_ppl", "eval/perplexity", "eval/ppl", "val/perplexity"])
def test_rising_validation_perplexity_still_stops_it(printed):
    c = Clock()
    events = [c.metric(i * 600, step=i * 1000, **{printed: v}) for i, v in enumerate(RISING)]
    assert _decisions(events)[-1] == "STOP:val-rising"


@pytest.mark.parametrize(
    ("line", "stops"),
    [("step={step} perplexity={v}", False), ("step={step} train/ppl={v}", False),
     ('{{"step": {step}, "train/perplexity": {v}}}', False),
     ("step={step} eval/perplexity={v}", True), ('{{"step": {step}, "val/ppl": {v}}}', True)],
)  # fmt: skip
def test_through_the_agent_a_log_of_training_perplexity_does_not_stop(line, stops):
    """The path a trainer's log takes: parsed and named by the agent's rules, then the default policy."""
    c = Clock()
    events = []
    for i, v in enumerate(RISING):
        data = normalise(parse_metrics(line.format(step=i * 1000, v=v)))
        assert data, line
        events.append(c.metric(i * 600, **data))
    assert ("STOP:val-rising" in _decisions(events)) is stops

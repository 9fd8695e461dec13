"""Each rule kind, table-driven: a YAML rule, a metric sequence, whether it opens an anomaly."""

import math

import pytest
from trainwarden.events import types as t

from tests.policy_helpers import Clock, policy, run

CASES = [
    # (name, rule fields, values of metric m, fires)
    ("nonfinite nan", "kind: nonfinite", [1.0, math.nan], True),
    ("nonfinite -inf", "kind: nonfinite", [1.0, -math.inf], True),
    ("nonfinite finite", "kind: nonfinite", [1.0, 1e30], False),
    ("threshold above", "kind: threshold, above: 10", [1, 11], True),
    ("threshold at the limit", "kind: threshold, above: 10", [1, 10], False),
    ("threshold below", "kind: threshold, below: 0.5", [1, 0.4], True),
    ("threshold ignores nan", "kind: threshold, below: 0.5", [1, math.nan], False),
    ("spike up mean", "kind: spike, ratio: 2, window: 4, min_samples: 4", [1, 1, 1, 1, 2.1], True),
    ("spike not ready", "kind: spike, ratio: 2, window: 4, min_samples: 4", [1, 1, 1, 2.1], False),
    (
        "spike median resists an outlier",
        "kind: spike, stat: median, window: 5, min_samples: 5",
        [1, 1, 1, 1, 50, 2.1],
        True,
    ),
    ("spike mean is dragged by it", "kind: spike, stat: mean, window: 5, min_samples: 5", [1, 1, 1, 1, 50, 2.1], False),
    ("spike down", "kind: spike, direction: down, window: 4, min_samples: 4", [10, 10, 10, 10, 4.9], True),
    ("spike down near miss", "kind: spike, direction: down, window: 4, min_samples: 4", [10, 10, 10, 10, 5.1], False),
    ("trend falling", "kind: trend, direction: falling, count: 2", [0.9, 0.8, 0.7], True),
    ("trend min_delta", "kind: trend, count: 2, min_delta: 0.05", [1.0, 1.01, 1.02], False),
    ("plateau max mode", "kind: plateau, window: 4, eps: 0.01, mode: max", [0.5, 0.5, 0.5, 0.501], True),
    ("plateau improving", "kind: plateau, window: 4, eps: 0.01, mode: max", [0.5, 0.5, 0.6, 0.6], False),
    ("baseline value, max mode", "kind: baseline, value: 0.8, mode: max", [0.7], True),
    ("baseline flat", "kind: baseline, value: 0.8, mode: max", [0.79], False),
    ("baseline fire_on flat", "kind: baseline, value: 0.8, mode: max, fire_on: [flat, worse]", [0.79], True),
    # transformers 5.23 Trainer, lr 40 under max_grad_norm 1 (tests/conformance diverge): the loss leaps from its
    # first value and thrashes (the default policy's loss-runaway, 3 samples in a row, needs the first value)
    ("runaway from its first value", "kind: runaway, start_ratio: 5", [0.782, 29.73, 14.55, 79.46, 1.359], True),
    ("runaway under start_ratio", "kind: runaway, start_ratio: 5", [0.782, 3.5, 3.0, 3.8, 2.9, 3.7, 3.1], False),
    ("lr zero after positive", "kind: lr_schedule", [1e-4, 0.0], True),
    ("lr zero at warmup start", "kind: lr_schedule", [0.0, 1e-4], False),
    ("lr rising with schedule any", "kind: lr_schedule, schedule: any", [3e-4, 1e-4, 3e-4], False),
    ("lr rising with schedule decay", "kind: lr_schedule", [3e-4, 1e-4, 3e-4], True),
]


@pytest.mark.parametrize(("name", "fields", "values", "fires"), CASES, ids=[c[0] for c in CASES])
def test_kind(name, fields, values, fires):
    c = Clock()
    pol = policy(f"  - {{id: k, metric: m, {fields}}}\n")
    out = run(pol, [c.metric(i, m=v) for i, v in enumerate(values)])
    assert any(typ == t.ANOMALY_OPENED for typ, _ in out) is fires


def test_divergence_needs_both_directions():
    pol = policy("  - {id: d, kind: divergence, rising: v, falling: m, count: 1}\n")
    c = Clock()
    diverging = [c.metric(0, m=2.0), c.metric(1, v=1.0), c.metric(2, m=1.5), c.metric(3, v=1.2)]
    assert any(typ == t.ANOMALY_OPENED for typ, _ in run(pol, diverging))
    c = Clock()
    together = [c.metric(0, m=2.0), c.metric(1, v=1.0), c.metric(2, m=1.5), c.metric(3, v=0.9)]
    assert not any(typ == t.ANOMALY_OPENED for typ, _ in run(pol, together))


def test_divergence_with_train_and_eval_in_the_same_event():
    pol = policy("  - {id: d, kind: divergence, rising: v, falling: m, count: 2}\n")
    c = Clock()
    events = [c.metric(i, m=2.0 - i / 10, v=1.0 + i / 10) for i in range(4)]
    out = run(pol, events)
    assert [d["reason"] for typ, d in out if typ == t.ANOMALY_OPENED] == [
        "v rose to 1.2 (from 1.1) while m fell to 1.8 (from 1.9), 2 evals in a row"
    ]


def test_absence_of_one_event_type_and_of_a_finite_metric():
    c = Clock()
    hb = policy("  - {id: hb, kind: absence, event: agent.heartbeat, duration: 90s}\n")
    assert run(hb, [c.event(t.AGENT_HEARTBEAT, 0), c.event(t.AGENT_HEARTBEAT, 60), c.tick(120)]) == []
    assert run(hb, [c.event(t.AGENT_HEARTBEAT, 0), c.tick(100)])[0][0] == t.ANOMALY_OPENED
    c = Clock()
    loss = policy("  - {id: l, kind: absence, metric: loss, duration: 60s}\n")
    nan_only = [c.metric(0, loss=1.0), c.metric(30, loss=math.nan), c.metric(61, loss=math.nan)]
    assert [typ for typ, _ in run(loss, nan_only)] == [t.DECISION, t.ANOMALY_OPENED]


def test_log_pattern_and_status():
    c = Clock()
    pol = policy("  - {id: lp, kind: log_pattern, pattern: 'disk (full|quota)'}\n"
                 "  - {id: st, kind: status, event: health, field: state, values: [zombie]}\n")  # fmt: skip
    out = run(pol, [c.log(0, "no problem"), c.log(1, "OSError: disk quota exceeded"),
                    c.event(t.HEALTH, 2, state="zombie")])  # fmt: skip
    assert [d["rule"] for typ, d in out if typ == t.ANOMALY_OPENED] == ["lp", "st"]
    assert out[0][1]["reason"] == "log: OSError: disk quota exceeded"


def test_a_nonfinite_loss_term_under_any_name():
    # VerSe's TF2 loop `loss_net: nan`, ParallelWaveGAN's `train/generator_loss = nan.`, VITS's `loss_disc=nan`
    pol = policy("  - {id: k, kind: nonfinite_term}\n")
    c = Clock()
    for name in ("loss_net", "train/generator_loss", "loss_disc"):
        out = run(pol, [c.metric(0, step=1, **{name: 1.0}), c.metric(1, step=2, **{name: math.nan})])
        assert [d["reason"] for typ, d in out if typ == t.ANOMALY_OPENED] == [f"{name}=nan at step 2"], name
    # not a loss term: the vocabulary's own loss (loss-nonfinite's), the fp16 scaler's scale, a held-out loss
    # (val-nonfinite's), an IoU
    for name in ("loss", "total_loss", "loss_scale", "val_loss", "iou"):
        out = run(pol, [c.metric(0, step=1, **{name: math.nan})])
        assert not [typ for typ, _ in out if typ == t.ANOMALY_OPENED], name

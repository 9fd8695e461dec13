"""A run that cannot learn (issue 39, "Stuck"): the plan its log states (agent/plan_lines.py, core/plan.py), the
`stuck` kind's confirm-STOPs after a share of that plan (or a number of evals), and `zero_start`'s STOP.

Lines are real where the corpus has them (tests/data/real, development part) or as the frameworks print them;
they go through the agent's reader (agent/reading.py) and the default policy, as in a live run."""

import json
import math
import random
from pathlib import Path

import pytest
from trainwarden.agent.hf_state import history_records
from trainwarden.agent.plan_lines import planned
from trainwarden.agent.reading import MetricReader
from trainwarden.core import plan
from trainwarden.events import types as t
from trainwarden.policies.default import default_policy
from trainwarden.policies.engine import PolicyState, apply_policy, evaluate
from trainwarden.policies.plan import share_done

from tests.policy_helpers import Clock, run

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
POLICY = default_policy()
STUCK = (
    "loss-stuck",
    "val-loss-stuck",
    "loss-at-chance",
    "val-at-chance",
    "loss-zero",
    "val-r2-stuck",
    "val-accuracy-stuck",
)


def events_of(lines: list[str]) -> list:
    """The metric events the agent's reader makes of `lines`, 10 s apart."""
    reader, c, out = MetricReader(), Clock(), []
    for line in lines:
        metrics, _ = reader.read(line)
        if metrics:
            out.append(c.metric(10.0 * len(out), **metrics))
    return out


def verdicts(lines: list[str]) -> tuple[list[str], list[dict]]:
    """(the stuck rules that opened, in order; the STOP decisions) of the default policy over `lines`."""
    out = run(POLICY, events_of(lines))
    opened = [d["rule"] for typ, d in out if typ == t.ANOMALY_OPENED and d["rule"] in STUCK]
    return opened, [d for typ, d in out if typ == t.DECISION and d["decision"] == t.STOP]


# --- the plan, as trainers print it -------------------------------------------------------------------------

PLANNED = {
    "Epoch 3/10": {"total_epochs": 10},  # Keras (keras_stuck_at_half.log line 3)
    "Epoch [1/5], Step [100/600], Loss: 0.2231": {"total_epochs": 5},  # the PyTorch tutorials
    "Epoch: [2/90]  lr 0.1": {"total_epochs": 90},
    "  Num Epochs = 3": {"total_epochs": 3},  # HF Trainer at log_level info
    "  Total optimization steps = 1,500": {"total_steps": 1500},
    "Namespace(max_steps=5000, num_train_epochs=3.0, seed=42)": {"total_epochs": 3, "total_steps": 5000},
    "max_steps: -1": {},  # unset
    " 40%|████      | 200/500 [01:10<01:45,  2.85it/s]": {"total_steps": 500},  # the HF Trainer's training bar
    "Training: 100%|██████████| 300/300 [00:10<00:00, 30.0it/s, loss=2.3]": {"total_steps": 300},
    "Epoch 3:  12%|█▎        | 1/8 [00:00<00:00, 406.35it/s, train_loss=2.660]": {},  # one epoch's batches
    "Epoch 0/-2  ━━━━━━━━━━━━━━━━━━━━ 8/8 0:00:00 • 0:00:00 432.22it/s train_loss: 2.334": {},  # Lightning, max_steps
    "Map: 100%|██████████| 1000/1000 [00:00<00:00, 5000.00 examples/s]": {},  # a datasets map bar
    "Evaluating: 100%|██████████| 16/16 [00:01<00:00, 10.0it/s]": {},
    "Epoch 1, 150/21692; acc: 0.08; ppl: 2.7": {},  # the batch within the epoch, not an epoch count
    "Number of classes: 10": {"num_classes": 10},
    "model = resnet50(num_classes=1000)": {"num_classes": 1000},
    "{'loss': 2.3026, 'learning_rate': 5e-05, 'epoch': 0.25}": {},
}


@pytest.mark.parametrize("line", sorted(PLANNED))
def test_the_plan_a_line_states(line):
    assert planned(line) == PLANNED[line]


def test_the_reader_sends_the_plan_once_with_the_next_metric_event():
    reader = MetricReader()
    assert reader.read("Number of classes: 10") == ({}, [])
    first, _ = reader.read("Epoch [1/5], Step [100/600], Loss: 2.3031")
    second, _ = reader.read("Epoch [1/5], Step [200/600], Loss: 2.3019")
    assert first["num_classes"] == 10 and first["total_epochs"] == 5 and first["loss"] == 2.3031
    assert "num_classes" not in second and "total_epochs" not in second
    third, _ = reader.read("Epoch [2/8], Step [100/600], Loss: 2.3019")  # a relaunch with more epochs: news again
    assert third["total_epochs"] == 8


def test_the_share_done_from_the_log_or_the_launch_config():
    c = Clock()
    state = PolicyState()
    apply_policy(POLICY, state)
    evaluate(POLICY, state, c.event(t.RUN_LAUNCHED, 0.0, config={"params": {"epochs": 20, "num_classes": 10}}))
    assert state.plan == {"total_epochs": 20, "num_classes": 10}
    assert share_done(state) is None  # no epoch yet
    evaluate(POLICY, state, c.metric(10.0, step=50, epoch=5, loss=1.0))
    assert share_done(state) == 0.25
    evaluate(POLICY, state, c.metric(20.0, step=60, epoch=30, loss=1.0))
    assert share_done(state) is None  # past the planned end: the plan read is not this run's
    assert plan.share({"total_steps": 1000}, 250) == 0.25
    assert plan.from_config({"max_steps": -1, "num_train_epochs": 3.0}) == {"total_epochs": 3}


# --- stuck: frozen, or at chance for a stated k -----------------------------------------------------------------


def test_a_keras_run_frozen_at_7_9712_is_a_confirm_stop_after_a_share_of_its_10_epochs():
    # keras_stuck_at_half.log (development part): loss and val_loss 7.9712 at every epoch of `Epoch e/10`
    lines = (REAL / "keras_stuck_at_half.log").read_text().splitlines()
    out = run(POLICY, events_of(lines))
    opened = {d["rule"]: d for typ, d in out if typ == t.ANOMALY_OPENED}
    stuck = opened["val-loss-stuck"]
    assert stuck["decision"] == t.STOP
    assert (
        "val_loss has been 7.9712 at 5 evals in a row (steps 2-6), 40% of the run's planned length" in stuck["reason"]
    )
    policy = POLICY.rule("val-loss-stuck")
    assert policy is not None and policy.confirm_s == 1800  # a judgement: a person may keep it running


def test_an_hf_run_at_ln_4_beside_an_accuracy_at_1_4_is_a_confirm_stop_within_its_useful_stop():
    # hf_state_quality_stuck_chance.trainer_state.json (development part; stop_by step 500): eval_loss 1.3863 and
    # eval_accuracy 0.23-0.30 (the two agree on k = 4), max_steps 3140 and num_train_epochs 20 at the state's top
    state = json.loads((REAL / "hf_state_quality_stuck_chance.trainer_state.json").read_text())
    c = Clock()
    out = run(POLICY, [c.metric(10.0 * i, **r.metrics) for i, r in enumerate(history_records(state))])
    stuck = next(d for typ, d in out if typ == t.ANOMALY_OPENED and d["rule"] == "val-loss-stuck")
    assert stuck["values"]["k"] == 4 and stuck["values"]["step"] <= 500
    assert "of the run's planned length: predictions at chance for a 4-way task" in stuck["reason"]


def test_a_classifier_at_ln_10_with_its_class_count_printed_is_a_confirm_stop():
    rnd = random.Random(1)
    lines = ["Number of classes: 10"] + [
        f"Epoch [{e}/10], Step [{s}/600], Loss: {math.log(10) + rnd.uniform(-0.03, 0.03):.4f}"
        for e in range(1, 11) for s in range(100, 601, 100)
    ]  # fmt: skip
    opened, stops = verdicts(lines)
    assert opened[:2] == ["loss-at-chance", "loss-stuck"]
    assert stops[0]["rule"] == "loss-stuck" and stops[0]["confirm_s"] == 1800
    assert "= ln 10 over" in stops[0]["reason"] and "predictions at chance for a 10-way task" in stops[0]["reason"]
    # the same loss without the class count: no chance verdict (any number is ln k for some k)
    assert verdicts(lines[1:]) == ([], [])


def test_a_slow_start_that_leaves_chance_within_its_share_is_not_stopped():
    # at ln 10 for the first 5 of 100 epochs (6 lines each: 5% of the run, under loss-stuck's 10%), then learning
    rnd = random.Random(2)
    losses = [math.log(10) + rnd.uniform(-0.03, 0.03) for _ in range(30)] + [2.2 * 0.99**i for i in range(200)]
    lines = ["Number of classes: 10"] + [
        f"Epoch [{i // 6 + 1}/100], Step [{(i % 6 + 1) * 100}/600], Loss: {v:.4f}" for i, v in enumerate(losses)
    ]
    opened, stops = verdicts(lines)
    assert stops == [] and "loss-stuck" not in opened


def test_a_run_that_states_no_length_is_stuck_after_evals_and_never_by_steps_alone():
    # Lightning's TQDM bar with lr 0 (tests/conformance lightning-tqdm-lr0): the eval loss never leaves its first
    # value at its 3 printed digits; the run states no length (max_steps), so 5 evals are the patience
    rows = []
    for i in range(1, 61):
        rows.append({"step": i, "epoch": 0, "train_loss": 0.70 + 0.02 * ((i * 7) % 5 - 2)})
        if i % 4 == 0:
            rows.append({"step": i, "epoch": 0, "val_loss": 0.703})
    c = Clock()
    out = run(POLICY, [c.metric(10.0 * i, **row) for i, row in enumerate(rows)])
    stops = [d for typ, d in out if typ == t.DECISION and d["decision"] == t.STOP]
    assert [d["rule"] for d in stops] == ["val-loss-stuck"]
    assert "5 evals" in stops[0]["reason"]
    # a training loss frozen with no length and no evals: a warning (loss-frozen), never a STOP
    frozen = [{"step": 10 * (i + 1), "loss": 2.3026} for i in range(60)]
    out = run(POLICY, [c.metric(1000.0 + 10.0 * i, **row) for i, row in enumerate(frozen)])
    assert not [d for typ, d in out if typ == t.DECISION and d["decision"] == t.STOP]


def test_an_eval_loss_that_learned_then_repeats_at_3_digits_is_not_stuck():
    # a converged run's bar: val_loss=0.253 for the last 8 evals after falling from 0.9: rounding, not constant outputs
    vals = [0.9, 0.7, 0.5, 0.4, 0.3, 0.27, 0.26] + [0.253] * 8
    c = Clock()
    rows = [{"step": 10 * i, "epoch": i, "total_epochs": 20, "val_loss": v} for i, v in enumerate(vals)]
    out = run(POLICY, [c.metric(10.0 * i, **row) for i, row in enumerate(rows)])
    assert not [d for typ, d in out if typ == t.ANOMALY_OPENED and d["rule"] in STUCK]


# --- zero_start: loss and grad norm exactly 0 from the first step -------------------------------------------------

HF_ZERO = "{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate': 1.9e-05, 'epoch': 0.02}"


def test_a_loss_and_grad_norm_of_exactly_0_from_the_first_step_is_a_stop():
    opened, stops = verdicts([HF_ZERO.replace("0.02", f"0.0{i}") for i in range(1, 9)])
    assert opened == ["loss-zero"]
    assert stops[0]["rule"] == "loss-zero" and "confirm_s" not in stops[0]
    assert "exactly 0 from the first logged step (5 logged steps): no gradient flows" in stops[0]["reason"]


def test_a_zero_loss_reached_by_learning_or_printed_alone_is_no_stop():
    learned = ["{'loss': 0.4, 'grad_norm': 1.2, 'learning_rate': 2e-05, 'epoch': 0.01}"] + [
        HF_ZERO.replace("0.02", f"0.0{i}") for i in range(2, 9)
    ]
    assert verdicts(learned)[1] == []
    alone = [f"{{'loss': 0.0, 'learning_rate': 1.9e-05, 'epoch': 0.0{i}}}" for i in range(1, 9)]
    assert verdicts(alone)[1] == []


# --- a regression stuck at the MSE of a constant prediction: its R² at 0 -------------------------------------------


def keras_regression(r2: list[float]) -> list[str]:
    """Keras 3 `fit` with `metrics=[R2Score()]` over 20 epochs: its header line and its epoch line."""
    lines = []
    for e, v in enumerate(r2, 1):
        lines += [f"Epoch {e}/20", f"32/32 ━━━━━━━━━━━━━━━━━━━━ 0s 2ms/step - loss: {1.0 - v:.4f} - r2_score: {v:.4f} "
                  f"- val_loss: {1.01 - v:.4f} - val_r2_score: {v - 0.001:.4f}"]  # fmt: skip
    return lines


def test_a_regression_whose_r2_stays_at_0_is_a_confirm_stop():
    rnd = random.Random(4)
    _, stops = verdicts(keras_regression([rnd.uniform(-0.004, 0.004) for _ in range(12)]))
    assert stops and stops[0]["rule"] == "val-r2-stuck" and stops[0]["confirm_s"] == 1800
    assert "no better than a constant prediction" in stops[0]["reason"]
    assert "of the run's planned length" in stops[0]["reason"]
    # a regression that learns (R² 0 -> 0.8) is not stuck, though it starts at 0
    assert verdicts(keras_regression([min(0.8, 0.1 * e) for e in range(12)])) == ([], [])


@pytest.mark.parametrize(
    "name",
    [
        "mxnet_node0_val_acc_frozen_0_1102_16_epochs.log",  # Validation-accuracy=0.110204 at every epoch
        "tkipf_gcn_train_val_acc_frozen_loss_falling.log",  # val_acc= 0.51000 at every epoch while the losses fall
    ],
)
def test_an_eval_accuracy_frozen_at_every_eval_is_a_confirm_stop(name):
    """Constant predictions: the very same eval accuracy (4+ significant digits) at 5 evals in a row (development
    part, issue 39 "identical values for dozens of logged steps"); the accuracy names no chance level by itself."""
    _, stops = verdicts((REAL / name).read_text().splitlines())
    assert stops and stops[0]["rule"] == "val-accuracy-stuck" and stops[0]["confirm_s"] == 1800, stops
    assert "the model is not learning" in stops[0]["reason"]


def test_an_eval_accuracy_that_moves_or_repeats_by_rounding_is_not_stuck():
    moving = [f"Epoch {e}: val_acc={0.5 + 0.01 * (e % 3):.4f} loss={1.0 / e:.4f}" for e in range(1, 15)]
    # it learned, then sits at a value printed with 2 digits (a converged run: its repeats are rounding)
    rounded = [f"Epoch {e}: val_acc={min(0.95, 0.6 + 0.1 * e):.2f} loss={1.0 / e:.4f}" for e in range(1, 15)]
    for lines in (moving, rounded):
        opened, _ = verdicts(lines)
        assert "val-accuracy-stuck" not in opened, opened  # (a flat one may be eval-early-stop's: not this rule's)


def test_the_class_count_and_the_length_from_the_launch_config():
    # `trainwarden launch ... --config num_classes=10 --config epochs=10`: nothing in the log states them
    rnd = random.Random(5)
    c = Clock()
    launched = c.event(t.RUN_LAUNCHED, 0.0, config={"num_classes": 10, "epochs": 10})
    rows = [{"step": i, "epoch": i // 10, "loss": math.log(10) + rnd.uniform(-0.03, 0.03)} for i in range(1, 40)]
    out = run(POLICY, [launched, *(c.metric(10.0 * i, **row) for i, row in enumerate(rows, 1))])
    stops = [d for typ, d in out if typ == t.DECISION and d["decision"] == t.STOP]
    assert stops[0]["rule"] == "loss-stuck" and "10-way task" in stops[0]["reason"]
    assert stops[0]["values"]["step"] == 20  # 20 logged values, held from epoch 0 into epoch 2 (20% of 10 epochs)


def test_at_chance_while_the_learning_rate_warms_up_is_no_stuck_run_when_it_states_no_length():
    """A slow start (tests/conformance slow_start: val accuracy at 1/4 and val loss at ln 4 for 14 evals while the
    learning rate warms up from 1e-6, then 95%): a run that states no length would pass its 5 evals inside the
    warm-up. The same evals with the learning rate flat are stuck."""

    def lines(warm: bool) -> list[str]:
        out = []
        for i in range(1, 15):
            lr = 1e-6 * 2**i if warm else 1e-3
            out += [
                f"step {25 * i} | loss 1.39{i % 7} | lr {lr:.2e}",
                f"eval step {25 * i} | val_loss {1.3863 + 0.0004 * (i % 3):.4f} | val_acc 0.25{i % 9}",
            ]
        return out

    assert verdicts(lines(warm=True)) == ([], [])
    opened, stops = verdicts(lines(warm=False))
    assert stops and stops[0]["rule"] in ("val-loss-stuck", "loss-stuck"), (opened, stops)

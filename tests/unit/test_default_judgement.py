"""The default policy's judgement that generalises (frozen and chance-level values, eval NaN, an eval past its
best, dynamic loss scaling): each rule on a true positive and on the near miss beside it. The sequences are
shapes trainers print (cited where a real run has it); the rules must not depend on one framework's names."""

import math
import random

import pytest
from trainwarden.events import types as t
from trainwarden.policies.default import default_policy

from tests.policy_helpers import Clock, run, summary

POLICY = default_policy()
NAN = math.nan


# the rules under test; the others (no loss at start-up in an eval-only sequence, an eval stuck where it
# started) have tests of their own
UNDER_TEST = frozenset({"loss-frozen", "val-at-chance", "val-accuracy-at-chance", "loss-at-chance", "val-nonfinite",
                        "val-past-best", "val-frozen", "grad-norm-nonfinite", "grad-norm-skipped", "loss-nonfinite",
                        "loss-scale-collapse", "loss-scale-at-minimum", "loss-stuck", "val-loss-stuck",
                        "loss-zero"})  # fmt: skip


def verdict(rows: list[dict]) -> tuple[list[tuple[str, str]], str | None, list[str]]:
    """(the anomalies of the rules under test opened as (rule, severity), the rule that asked for STOP, their
    reasons), one metric event per row."""
    c = Clock()
    out = run(POLICY, [c.metric(i * 60.0, **row) for i, row in enumerate(rows)])
    mine = [d for typ, d in out if typ == t.ANOMALY_OPENED and d["rule"] in UNDER_TEST]
    stop = next((d["rule"] for typ, d in out if typ == t.DECISION and d["decision"] == t.STOP and d["rule"] in
                 UNDER_TEST | {"val-rising"}), None)  # fmt: skip
    return [(d["rule"], d["severity"]) for d in mine], stop, [d["reason"] for d in mine]


def noisy(level: float, n: int, jitter: float, *, seed: int = 3, key: str = "loss", every: int = 10) -> list[dict]:
    rnd = random.Random(seed)
    return [{"step": (i + 1) * every, key: level + rnd.uniform(-jitter, jitter)} for i in range(n)]


def falling(start: float, end: float, n: int, *, key: str = "loss", every: int = 10) -> list[dict]:
    return [{"step": (i + 1) * every, key: start + (end - start) * i / (n - 1)} for i in range(n)]


CASES = {
    # --- a frozen training loss: the same value at 20 logged steps ---------------------------------------
    "loss frozen at 2.3026": ([{"step": 10 * (i + 1), "loss": 2.3026} for i in range(25)], ["loss-frozen"], None),
    "one step's bar redrawn 25 times": ([{"step": 10, "loss": 2.3026}] * 25, [], None),
    "a loss alternating in its 4th digit": (
        [{"step": 10 * (i + 1), "loss": 2.3026 if i % 2 else 2.3025} for i in range(25)], [], None),
    "a loss of 0.0 (too few digits to be frozen)": ([{"step": 10 * (i + 1), "loss": 0.0} for i in range(25)], [],
                                                    None),
    # --- chance level -----------------------------------------------------------------------------------
    # hf_state_quality_stuck_chance: eval_loss 1.38629 +- 0.0007 (ln 4) for 60 evals
    # without evidence of k no chance verdict: any number is ln k for some k
    "eval loss at ln 4, no class count": (noisy(math.log(4), 10, 0.0005, key="val_loss", every=50), [], None),
    # ... with it (an eval accuracy at 1/4 beside it): at chance, and after 5 evals there a confirm-STOP
    "eval loss at ln 4 beside an accuracy at 1/4": (
        [{**row, "val_accuracy": 0.258} for row in noisy(math.log(4), 10, 0.0005, key="val_loss", every=50)],
        ["val-at-chance", "val-loss-stuck", "val-accuracy-at-chance"], "val-loss-stuck"),
    "eval loss falling through ln 4": (falling(2.5, 0.6, 12, key="val_loss", every=50), [], None),
    "eval loss flat between ln 4 and ln 5": (noisy(1.5, 10, 0.0005, key="val_loss", every=50), [], None),
    "eval accuracy at 1/4": (noisy(0.25, 10, 0.04, key="val_accuracy", every=50), ["val-accuracy-at-chance"], None),
    "eval accuracy rising through 1/4": (falling(0.2, 0.9, 12, key="val_accuracy", every=50), [], None),
    "training loss at ln 2, no class count": (noisy(math.log(2), 55, 0.02), [], None),
    # the class count in the log (sent once, with the first metric event), and its length: 10 epochs of 10 lines
    "training loss at ln 2 of a 2-class run, 10 epochs": (
        [{**row, "epoch": i // 10, **({"num_classes": 2, "total_epochs": 10} if i == 0 else {})}
         for i, row in enumerate(noisy(math.log(2), 55, 0.02))], ["loss-at-chance", "loss-stuck"], "loss-stuck"),
    # 4.607 = ln 100 on a 1000-class run, 2.07 = ln 8 on a 10-class one: not their chance level
    "a loss flat at ln 100 of a 1000-class run": (
        [{**row, "epoch": i // 10, **({"num_classes": 1000, "total_epochs": 10} if i == 0 else {})}
         for i, row in enumerate(noisy(math.log(100), 55, 0.02))], [], None),
    "a loss flat at ln 8 of a 10-class run": (
        [{**row, "epoch": i // 10, **({"num_classes": 10, "total_epochs": 10} if i == 0 else {})}
         for i, row in enumerate(noisy(math.log(8), 55, 0.02))], [], None),
    "training loss falling through ln 2": (falling(1.2, 0.3, 80), [], None),
    # --- an eval loss that turns NaN is a STOP by itself, in any naming -------------------------------------
    "eval_loss nan": ([*falling(2.0, 1.5, 3, key="eval_loss"), {"step": 40, "eval_loss": NAN}], ["val-nonfinite"],
                      "val-nonfinite"),
    "val/loss inf": ([*falling(2.0, 1.5, 3, key="val/loss"), {"step": 40, "val/loss": math.inf}], ["val-nonfinite"],
                     "val-nonfinite"),
    "valid_loss finite": (falling(2.0, 1.5, 4, key="valid_loss"), [], None),
    # --- an eval past its best: the gradient-boosting shape (eval-logloss up round after round, noisy) ------
    "eval loss 12 rounds past its best": (
        [*falling(0.69, 0.52, 30, key="val_loss", every=1),
         *({"step": 31 + i, "val_loss": 0.52 + 0.01 * (i + 1) * (1 if i % 2 else 0.8)} for i in range(12))],
        ["val-past-best"], "val-rising"),  # up 3 rounds in a row already: val-rising's early stop
    "a bump of 8 evals, then a new best": (
        [*falling(0.69, 0.52, 30, key="val_loss", every=1),
         *({"step": 31 + i, "val_loss": 0.53 + 0.001 * (i % 2)} for i in range(8)), {"step": 40, "val_loss": 0.51},
         {"step": 41, "val_loss": 0.515}, {"step": 42, "val_loss": 0.509}], [], None),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_default_rule(name):
    rows, rules, stop = CASES[name]
    opened, stopped, _ = verdict(rows)
    assert [rule for rule, _ in opened] == rules, name
    assert stopped == stop, name


def test_the_reasons_say_it_in_words():
    _, _, reasons = verdict(CASES["loss frozen at 2.3026"][0])
    assert reasons == ["loss has been 2.3026 at 20 logged steps in a row (steps 10-200): the model is not learning "
                       "at step 200"]  # fmt: skip
    _, _, reasons = verdict(CASES["eval loss at ln 4 beside an accuracy at 1/4"][0])
    assert reasons[0].startswith("val_loss 1.386")
    assert "= ln 4 over 3 evals (steps 50-150), 2 evals: predictions at chance for a 4-way task" in reasons[0]
    _, _, reasons = verdict(CASES["training loss at ln 2 of a 2-class run, 10 epochs"][0])
    assert (
        "= ln 2 over 20 logged steps (steps 10-200), 10% of the run's planned length: predictions at chance"
        in (reasons[-1])
    )
    _, _, reasons = verdict(CASES["eval loss 12 rounds past its best"][0])
    assert "has not beaten its best 0.52 for 10 evals" in reasons[0]
    assert "early stopping, the best was at step 30" in reasons[0]


# --- an eval carried on training lines is one eval; an eval printed on its own is an eval, even when it repeats ---


def test_an_eval_value_carried_on_every_training_line_is_one_eval():
    # a loop printing the last val_loss on every step's line (`epoch 0 step 7 loss 0.61 val_loss 0.6931`)
    rows = [{"step": i, "epoch": 0, "loss": 0.7 - 0.002 * i, "val_loss": 0.6931} for i in range(1, 40)]
    rows += [{"step": 40 + i, "epoch": 1, "loss": 0.6 - 0.002 * i, "val_loss": 0.5123} for i in range(40)]
    opened, stop, _ = verdict(rows)
    assert (opened, stop) == ([], None)
    # the very same value at the next epoch is a repeat (keras_stuck_at_half: val_loss 7.9712 every epoch)
    again = [{"step": 1, "epoch": 1, "val_loss": 7.9712}, {"step": 2, "epoch": 2, "val_loss": 7.9712}]
    opened, stop, _ = verdict(again)
    assert stop == "val-frozen"


def test_evals_printed_on_their_own_count_even_when_they_score_the_same():
    # lightning 2.6.6's TQDM bar, lr 3e-4 (tests/conformance eval_stall): after each eval bar the agent publishes
    # the postfix's `val_loss=0.753` at 3 digits (agent.bars.fresh), eval after eval within epoch 0, beside
    # training steps that fluctuate: the eval makes no progress
    rows: list[dict] = []
    for i in range(1, 61):
        rows.append({"step": i, "epoch": 0, "loss": 0.75 + 0.03 * ((i * 7) % 5 - 2) / 2})
        if i % 4 == 0:
            rows.append({"step": i, "epoch": 0, "val_loss": 0.753 if i < 36 else 0.752})
    all_opened = summary(run(POLICY, [Clock().metric(i * 10.0, **row) for i, row in enumerate(rows)]))
    assert "opened:val-no-progress" in all_opened, all_opened


def test_a_late_wobble_of_a_boosting_runs_eval_loss_is_no_early_stop():
    # lightgbm 4.7 (tests/conformance, healthy): `[30]\tvalid_0's binary_logloss: 0.0444918` ... rising 3 rounds
    # to 0.0467 after falling from 0.4875: under 1% of the improvement given back
    wobble = [0.4875, 0.3643, 0.2773, 0.15, 0.08, 0.05, 0.04449, 0.0451, 0.04644, 0.04672]
    rows = [{"step": i, "val_loss": v, "loss": 0.5 - 0.01 * i} for i, v in enumerate(wobble, 1)]
    assert verdict(rows) == ([], None, [])
    # the same rise on a run that has not improved much is an early stop
    rising = [0.60, 0.55, 0.52, 0.50, 0.53, 0.56, 0.60]
    rows = [{"step": i, "val_loss": v, "loss": 0.5 - 0.01 * i} for i, v in enumerate(rising, 1)]
    assert verdict(rows)[1] == "val-rising"


def test_an_eval_repeated_while_the_training_loss_on_its_line_falls_is_chance():
    # xgboost 3.2 (tests/conformance, healthy): `[45]\ttrain-logloss:0.01833\teval-logloss:0.04653`, then
    # `[46]\ttrain-logloss:0.01810\teval-logloss:0.04653`: a boosting round is an eval, and the model still learns
    rounds = [{"step": 45, "loss": 0.01833, "val_loss": 0.04653}, {"step": 46, "loss": 0.01810, "val_loss": 0.04653}]
    assert verdict(rounds)[1] is None
    dead = [{"step": 45, "loss": 0.7, "val_loss": 0.04653}, {"step": 46, "loss": 0.7, "val_loss": 0.04653}]
    assert verdict(dead)[1] == "val-frozen"


# --- mixed precision: dynamic loss scaling at start-up is normal ------------------------------------------------


def scales(*values: float, start: int = 1) -> list[dict]:
    return [{"step": start + i, "loss_scale": v, "overflow": 1} for i, v in enumerate(values)]


@pytest.mark.parametrize(("rows", "stop"), [
    # DeepSpeed / apex start-up search from 2^16, halving on each of the first steps
    (scales(*(2.0**p for p in range(15, 9, -1))), None),
    # fairseq: 128 halved down to 2 at start-up, then 2.0 on every progress line (fairseq_v0_transformer_wmt_healthy)
    ([*scales(64.0, 32.0, 16.0, 8.0, 4.0, 2.0), *({"step": 10 + i, "loss": 9.0 - i / 10, "loss_scale": 2.0}
                                                  for i in range(5))], None),
    # a search that goes under 1: even unscaled, every step overflows
    (scales(*(2.0**p for p in range(15, -3, -1))), "loss-scale-collapse"),
    # a storm later on (deepspeed_hf_overflow_storm_to_min_scale: 64 -> 32 -> 16 -> 8 at step 378)
    (scales(32.0, 16.0, 8.0, 4.0, start=378), "loss-scale-collapse"),
    # the start-up search, steps going through at 64, then the storm: no longer the search
    ([*scales(*(2.0**p for p in range(15, 5, -1))), *scales(32.0, 16.0, 8.0, start=378)], "loss-scale-collapse"),
])  # fmt: skip
def test_loss_scale_search_and_collapse(rows, stop):
    opened, stopped, _ = verdict(rows)
    assert stopped == stop
    assert all(rule == "loss-scale-collapse" for rule, _ in opened)


# HF Trainer fp16, logging_steps=1: the steps of the scaler's start-up search are skipped (grad_norm nan, the lr
# not stepped yet) beside a finite loss; then training goes on
HF_SEARCH = [{"step": i + 1, "loss": 2.3051 - 0.001 * i, "grad_norm": NAN, "lr": 0.0} for i in range(6)] + [
    {"step": 7 + i, "loss": 2.2987 - 0.01 * i, "grad_norm": 1.8, "lr": 1e-5 * (i + 1)} for i in range(10)]  # fmt: skip
# mmengine averages grad_norm over its logging interval: one skipped step in each makes every line NaN
AVERAGED = [{"step": 10 * (i + 1), "loss": 2.45 + 0.01 * (i % 3), "grad_norm": NAN} for i in range(30)]


@pytest.mark.parametrize(("rows", "opened", "stop"), [
    (HF_SEARCH, [], None),
    (AVERAGED, [("grad-norm-skipped", "warning")], None),
    # ModernBERT (hf_dict_modernbert_gradnorm_nan_loss_zero): loss 0.0 beside grad_norm nan: broken, stop at once
    ([*AVERAGED[:3], {"step": 40, "loss": 0.0, "grad_norm": NAN}], [("grad-norm-nonfinite", "critical")],
     "grad-norm-nonfinite"),
    # the demo: loss nan beside grad_norm nan
    ([*AVERAGED[:3], {"step": 40, "loss": NAN, "grad_norm": NAN}],
     [("loss-nonfinite", "critical"), ("grad-norm-nonfinite", "critical")], "loss-nonfinite"),
])  # fmt: skip
def test_nonfinite_grad_norms_beside_the_loss(rows, opened, stop):
    got, stopped, _ = verdict(rows)
    assert (got, stopped) == (opened, stop)


# --- a gradient-boosting log, in its own names ---------------------------------------------------------------

# xgboost 3.2.0 (xgb.train, binary:logistic, eta 0.3, max_depth 8, evals=[(train, "train"), (valid, "eval")]
# on sklearn's make_classification(n_samples=600, n_features=20, n_informative=3, flip_y=0.3, random_state=0),
# half held out): `[N]\ttrain-logloss:X\teval-logloss:Y`, rounds 0-14 as printed
XGB_EVAL = [0.66884, 0.65946, 0.64228, 0.66076, 0.66586, 0.67862, 0.69569, 0.70797, 0.73429, 0.74309, 0.74063,
            0.75592, 0.76848, 0.77242, 0.77851]  # fmt: skip
XGB_TRAIN = [0.55207, 0.45843, 0.38532, 0.33053, 0.29741, 0.26082, 0.22829, 0.20265, 0.17911, 0.15933, 0.14225,
             0.12789, 0.12020, 0.11113, 0.10281]  # fmt: skip


def test_a_boosting_eval_loss_past_its_best_names_the_best_round():
    from trainwarden.core.metrics import normalise

    rows = [normalise({"step": i, "train-logloss": tr, "eval-logloss": ev})
            for i, (tr, ev) in enumerate(zip(XGB_TRAIN, XGB_EVAL, strict=True))]  # fmt: skip
    assert rows[0] == {"step": 0, "loss": 0.55207, "val_loss": 0.66884}
    opened, _, reasons = verdict(rows)
    assert ("val-past-best", "warning") in opened
    reason = reasons[[rule for rule, _ in opened].index("val-past-best")]
    assert reason.startswith("val_loss has not beaten its best 0.6423 for 10 evals and is 0.7685 now (+20%)")
    assert "the best was at step 2" in reason
    opened, _, _ = verdict(rows[:12])  # 9 rounds past its best: not yet
    assert "val-past-best" not in [rule for rule, _ in opened]


def test_a_loss_that_leaps_from_its_first_value_and_thrashes_is_stopped_by_the_training_loss():
    # transformers 5.23 Trainer, lr 40 under max_grad_norm 1 (tests/conformance diverge): clipping keeps the loss
    # thrashing between 1 and 100 from a first 0.782; no low level is held for long, so only its first value
    # tells it ran away (before: STOP by val-runaway at the third eval, no training-loss rule)
    losses = [0.782, 29.73, 14.55, 79.46, 1.359, 38.31, 107.5, 24.53, 49.18, 6.521, 46.73, 4.616]
    out = run(POLICY, [Clock().metric(i * 60.0, step=i, loss=v) for i, v in enumerate(losses, 1)])
    stops = [d for typ, d in out if typ == t.DECISION and d["decision"] == t.STOP]
    assert stops and stops[0]["rule"] == "loss-runaway", summary(out)
    assert "its first value 0.782" in stops[0]["reason"], stops[0]

"""The metric that matters: eval loss rising while the run's primary metric (WER, accuracy, ...) still
improves is not an early stop; and training perplexity never counts as validation perplexity.

Real runs: the Whisper fine-tune's `trainer_state.json` (tests/data/real, MANIFEST: NOSTOP, eval_loss 0.307 ->
0.468 while eval_wer 34.6 -> 32.0) and fairseq logs from the corpus (fairseq_v0_*, fairseq_json_log_*).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from trainwarden.core.metrics import canonical, normalise, quality
from trainwarden.events import types as t
from trainwarden.policies.default import default_policy
from trainwarden.policies.engine import PolicyState
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.loader import load_policy

from tests.policy_helpers import Clock, run, summary
from trainwarden.cli.policy import log_events

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
WHISPER = REAL / "hf_state_whisper_small_hi_evalloss_up_wer_down.trainer_state.json"


def whisper_events(clock: Clock, *, keep: tuple[str, ...] | None = None) -> list:
    """The run's `log_history` as metric events under the agent's names, 10 s apart (as a backtest)."""
    history = json.loads(WHISPER.read_text())["log_history"]
    out = []
    for i, entry in enumerate(history):
        data: dict[str, Any] = normalise({k: v for k, v in entry.items() if isinstance(v, int | float)})
        if keep is not None:
            data = {k: v for k, v in data.items() if k in keep or not k.startswith("val_")}
        out.append(clock.metric(i * 10, **data))
    return out


def _stops(out: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [s for s in summary(out) if s.startswith("STOP")]


def test_the_whisper_run_is_what_the_manifest_says():
    evals = [e for e in whisper_events(Clock()) if "val_loss" in e.data]
    assert [round(e.data["val_loss"], 3) for e in evals] == [0.307, 0.356, 0.421, 0.452, 0.468]
    assert [round(e.data["val_wer"], 1) for e in evals] == [34.6, 33.1, 32.6, 32.0, 32.1]


def test_eval_loss_rising_while_the_inferred_wer_improves_is_not_an_early_stop():
    out = run(default_policy(), whisper_events(Clock()))
    assert _stops(out) == []
    assert "opened:val-rising" not in summary(out) and "opened:overfitting" not in summary(out)


def test_without_a_primary_metric_the_same_eval_loss_stops_the_run():
    """The test above can fail: the same run with its WER column removed is an early stop."""
    out = run(default_policy(), whisper_events(Clock(), keep=("val_loss",)))
    assert _stops(out) == ["STOP:val-rising"]


def test_a_primary_metric_that_stopped_improving_no_longer_holds_the_stop_back():
    c = Clock()
    events = whisper_events(c)
    last = events[-1].ts - events[0].ts
    # three more evals, eval loss still rising and WER no better than its best (32.01)
    for k, (loss, wer) in enumerate([(0.47, 32.4), (0.48, 32.3), (0.49, 32.2)], start=1):
        events.append(c.metric(last + k * 10, step=5000 + k * 1000, val_loss=loss, val_wer=wer))
    assert _stops(run(default_policy(), events)) == ["STOP:val-rising"]


def test_the_policy_names_the_primary_metric():
    text = (REAL.parents[2] / "policies" / "default.yaml").read_text()
    named = load_policy(text.replace("name: default", "name: p\nprimary: {metric: eval_wer}", 1), source="p.yaml")
    assert named.primary is not None and named.primary.mode == "min" and "val_wer" in named.primary.names
    assert _stops(run(named, whisper_events(Clock()))) == []
    # named as a metric the run does not print: nothing holds the stop back, and nothing is guessed either
    other = load_policy(text.replace("name: default", "name: p\nprimary: {metric: bleu}", 1), source="p.yaml")
    assert _stops(run(other, whisper_events(Clock()))) == ["STOP:val-rising"]


def test_the_launch_config_names_the_primary_metric():
    c = Clock()
    launched = c.event(t.RUN_LAUNCHED, -1, config={"primary_metric": "eval_accuracy", "primary_mode": "max"})
    state = PolicyState()
    # the config names a metric this run does not print: WER is not guessed, the eval loss stops it
    assert _stops(run(default_policy(), [launched, *whisper_events(c)], state)) == ["STOP:val-rising"]
    assert state.primary is not None and state.primary["how"] == "named"
    c = Clock()
    launched = c.event(t.RUN_LAUNCHED, -1, config={"params": {"primary_metric": "eval_wer"}})
    assert _stops(run(default_policy(), [launched, *whisper_events(c)])) == []


def test_a_primary_metric_without_a_known_direction_needs_its_mode():
    rules = "rules:\n  - {id: a, kind: nonfinite, metric: loss}\n"
    with pytest.raises(PolicyError) as info:
        load_policy(f"name: p\nprimary: {{metric: my_score}}\n{rules}", source="p.yaml")
    assert "say 'mode: min' or 'mode: max'" in str(info.value)
    ok = load_policy(f"name: p\nprimary: {{metric: my_score, mode: max}}\n{rules}", source="p.yaml")
    assert ok.primary is not None and ok.primary.mode == "max"


@pytest.mark.parametrize(
    ("name", "family", "mode"),
    [("eval_wer", "wer", "min"), ("val_acc", "acc", "max"), ("coco/bbox_mAP", "map", "max"),
     ("metrics/mAP50-95(B)", "map", "max"), ("valid_bleu", "bleu", "max"), ("eval_accuracy", "accuracy", "max"),
     ("acc", None, None), ("train/acc", None, None), ("val_loss", None, None), ("f1", None, None)],
)  # fmt: skip
def test_which_printed_names_can_be_the_primary_metric(name, family, mode):
    """Keras `acc` vs `val_acc`, HF `eval_wer`, mmdet `coco/bbox_mAP`, YOLO `metrics/mAP50-95(B)`: a training
    accuracy is never a primary metric."""
    found = quality(name)
    assert (found.family if found else None, found.mode if found else None) == (family, mode)


def test_two_candidate_families_side_by_side_decide_by_their_consensus():
    """Issue 39 item 4: val loss rising while val accuracy and F1 climb is calibration drift, not an early stop;
    none of them is guessed to be the primary, at least half of them improving holds the stop back."""
    c = Clock()
    events = [c.metric(i * 10, step=i * 100, val_loss=1.0 + i / 10, val_accuracy=0.5 + i / 100, val_f1=0.4 + i / 100)
              for i in range(6)]  # fmt: skip
    state = PolicyState()
    assert _stops(run(default_policy(), events, state)) == []
    assert state.primary is not None and state.primary["how"] == "consensus"


def test_a_consensus_that_no_longer_improves_holds_nothing_back():
    """The test above can fail: the same val loss beside an accuracy and F1 past their best is an early stop."""
    c = Clock()
    events = [c.metric(i * 10, step=i * 100, val_loss=1.0 + i / 10, val_accuracy=0.6 - i / 100, val_f1=0.5 - i / 100)
              for i in range(6)]  # fmt: skip
    assert _stops(run(default_policy(), events)) == ["STOP:val-rising"]


@pytest.mark.parametrize(
    "name",
    [
        "hf_trainer_state_dnabert2_eval_loss_up_acc_up_healthy.trainer_state.json",
        "hf_trainer_state_finnews_acc_drop_macro_f1_up.trainer_state.json",
    ],
)
def test_real_classifiers_whose_eval_loss_rises_while_their_scores_climb_are_not_stopped(name):
    """Two healthy corpus runs (dev part): eval_loss up while accuracy, F1 and MCC (DNABERT-2) or macro-F1
    (a news classifier whose accuracy swings) climb; val-rising stopped both before the consensus."""
    out = run(default_policy(), list(log_events(REAL / name, interval=10)))
    assert _stops(out) == []


# -- training perplexity is never validation perplexity ---------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["fairseq_v0_backtranslation_valid_bump.log", "fairseq_json_log_wmt14_enfr_healthy.log",
     "fairseq_v0_transformer_epoch_summaries_healthy.log", "fairseq_v0_pointer_gnorm_jump.log"],
)  # fmt: skip
def test_fairseq_train_lines_give_ppl_and_valid_lines_val_ppl(name):
    """`| epoch 030 | loss 3.736 | ... | ppl 4.13 | ...` (train summary) vs `| epoch 030 | valid on 'valid' subset
    | valid_loss 3.75939 | ... | valid_ppl 3.98`, read by the agent from the real files."""
    metrics = [dict(e.data) for e in log_events(REAL / name, interval=10) if e.type == t.METRIC]
    with_ppl = [m for m in metrics if any("ppl" in k for k in m)]
    assert with_ppl, name
    for m in with_ppl:
        ppl_names = {k for k in m if "ppl" in k}
        assert ppl_names in ({"ppl"}, {"val_ppl"}), m
        assert ("val_ppl" in m) == ("val_loss" in m) and ("ppl" in m) == ("loss" in m), m


def test_the_vocabulary_keeps_the_two_perplexities_apart():
    assert canonical("ppl") == "ppl" and canonical("perplexity") == "ppl" and canonical("train_ppl") == "ppl"
    assert canonical("valid_valid_ppl") == "val_ppl" and canonical("eval_perplexity") == "val_ppl"
    policy = default_policy()
    for rule in policy.rules:
        keys = rule.kind.keys or ()
        if "val_ppl" in keys:
            assert not {"ppl", "perplexity", "train/ppl", "train_ppl"} & set(keys), rule.id


def test_rising_training_perplexity_in_a_real_fairseq_log_never_reaches_the_val_rules():
    """The pointer run's train_inner lines (`loss=10.093, nll_loss=10.093, ppl=1092.29, ...`), replayed with
    their ppl rising: no val rule opens."""
    events = [e for e in log_events(REAL / "fairseq_v0_pointer_gnorm_jump.log", interval=10) if e.type == t.METRIC]
    c = Clock()
    rising = [c.metric(i * 10, **{**e.data, "ppl": 1000.0 + 100 * i}) for i, e in enumerate(events)]
    out = summary(run(default_policy(), rising))
    assert not [s for s in out if "val-" in s or "overfitting" in s], out


def test_a_primary_metric_frozen_from_its_first_eval_holds_nothing_back():
    """Keras run whose val_accuracy is frozen at 0.5676 while val_loss jumps 2.73 -> 6.6 (tests/data/real,
    MANIFEST: STOP): val_accuracy is inferred as the primary metric, but it never improved, so nothing waits."""
    from trainwarden.policies.primary import improving

    events = list(log_events(REAL / "keras_overfit_val_loss_explodes.log", interval=10))
    pol, state = default_policy(), PolicyState()
    run(pol, events, state)
    assert state.primary is not None and state.primary["names"] == ["val_accuracy"]
    assert state.primary["how"] == "inferred" and state.primary["mode"] == "max"
    rule = pol.rule("val-rising")
    assert rule is not None and rule.defer and not improving(state, rule)

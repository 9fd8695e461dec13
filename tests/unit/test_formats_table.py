"""The format table (agent.formats.FORMATS): every entry's real samples are read as they say, by that entry and by
the whole table, and each quotes its source file exactly (agent.format_samples)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from trainwarden.agent.format_samples import SAMPLES
from trainwarden.agent.formats import FORMATS, GENERAL, parse_metrics, read_line
from trainwarden.agent.prefixes import strip_prefix
from trainwarden.core.metrics import normalise, quantity, role

DATA = Path(__file__).resolve().parent.parent / "data"
ENTRIES = {fmt.name: fmt for fmt in (*FORMATS, GENERAL)}
CASES = [(name, sample) for name, samples in SAMPLES.items() for sample in samples]


def _equal(a: float, b: float) -> bool:
    return (isinstance(a, float) and math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)


def test_every_format_has_samples_and_every_sample_a_format():
    assert set(SAMPLES) == set(ENTRIES)
    assert all(SAMPLES[name] for name in ENTRIES)


@pytest.mark.parametrize(("name", "sample"), CASES, ids=[f"{n}:{s.line[:30]}" for n, s in CASES])
def test_a_sample_is_read_by_its_format(name, sample):
    assert sample.line in (DATA / sample.source).read_text(encoding="utf-8"), "quote the source line exactly"
    got, fmt = read_line(sample.line)
    if not sample.holds:  # a line that holds no metric: its format says so
        assert got == {} and fmt is ENTRIES[name]
        return
    assert fmt is ENTRIES[name], f"read by {fmt and fmt.name}, not {name}"
    found = normalise(got)
    assert all(k in found and _equal(found[k], v) for k, v in sample.holds.items()), found
    own = ENTRIES[name]
    bare = strip_prefix(sample.line)
    assert own.accepts(bare, bare.lstrip())


@pytest.mark.parametrize(
    ("line", "expected"),
    [  # the print styles of hand-written training loops (as the PyTorch tutorials and examples print them)
        ("step 10 loss 2.31", {"step": 10, "loss": 2.31}),
        ("2026-01-01 12:00:00,123 - INFO - step 10 loss 2.3", {"step": 10, "loss": 2.3}),
        ("Epoch [1/5], Step [100/600], Loss: 0.1234", {"epoch": 1, "step": 100, "loss": 0.1234}),
        ("epoch 1 | step 100 | loss 2.3456 | lr 1.0e-04", {"epoch": 1, "step": 100, "loss": 2.3456, "lr": 1e-4}),
        ("Epoch: 1 | Step: 100 | Loss: 2.3456 | Acc: 91.2%", {"epoch": 1, "step": 100, "loss": 2.3456, "acc": 91.2}),
        ("Epoch 3 batch 40 loss=0.25", {"epoch": 3, "loss": 0.25}),
        ("train loss 2.3 | val loss 2.5", {"loss": 2.3, "val_loss": 2.5}),
        ("loss: 0.123 - accuracy: 0.9", {"loss": 0.123, "accuracy": 0.9}),
        ("[10]\ttrain-logloss:0.6\teval-logloss:0.7", {"step": 10, "loss": 0.6, "val_loss": 0.7}),
        ("[10]\tvalid_0's binary_logloss: 0.6", {"step": 10, "val_loss": 0.6}),
        ("Train Epoch: 1 [640/60000 (1%)]\tLoss: 2.301", {"epoch": 1, "loss": 2.301}),
        ("epoch 1 iter 100 loss 2.1 acc 45.3%", {"epoch": 1, "step": 100, "loss": 2.1, "acc": 45.3}),
        ("Iteration 100/1000, loss = 0.523", {"step": 100, "loss": 0.523}),
        ("step 5 loss NaN time 12ms", {"step": 5, "loss": math.nan, "time_ms": 12}),
        ("{'loss': '0.05', 'grad_norm': 'nan', 'learning_rate': '5e-05', 'epoch': '0.0625'}",
         {"loss": 0.05, "grad_norm": math.nan, "lr": 5e-05, "epoch": 0.0625}),
        # the styles most found in public training scripts (code search; each a print or a log pasted in a README):
        # yaneurao/Pytra `f"step {step+1:4d} / {num_steps:4d} | loss {loss:.4f}"`
        ("step    1 /  100 | loss 2.3456", {"step": 1, "loss": 2.3456}),
        # the PyTorch quickstart's `print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")`
        ("loss: 2.301234  [   64/60000]", {"loss": 2.301234}),
        # `f"epoch {epoch:5d}/{epochs:5d} | time/epoch {time_step:8.2f} ms | loss {loss:3.6f} | val_loss {v:.6f}"`
        ("epoch     3/   10 | time/epoch    12.34 ms | loss 0.123456 | val_loss 0.234567",
         {"epoch": 3, "loss": 0.123456, "val_loss": 0.234567}),
        ("epoch=3, loss=0.1234", {"epoch": 3, "loss": 0.1234}),  # `print(f'{epoch=}, loss={loss.item():.4f}')`
        ("[Epoch 2] Loss: 0.1234 | Accuracy: 91.20%", {"epoch": 2, "loss": 0.1234, "accuracy": 91.2}),
        ("Log > train_acc: 0.9000 - val_acc: 0.8000 - train_loss: 0.1000 - val_loss: 0.2000",
         {"acc": 0.9, "val_acc": 0.8, "loss": 0.1, "val_loss": 0.2}),
        ("- 12s - loss:0.1234 - acc:0.9000 - val_loss:0.2000 - val_acc:0.8000",
         {"loss": 0.1234, "acc": 0.9, "val_loss": 0.2, "val_acc": 0.8}),
        # aakashvardhan/s21-gpt2 log.md (a GPT-2 reproduction's log): `step 0, loss: 10.899394989013672`
        ("step 0, loss: 10.899394989013672", {"step": 0, "loss": 10.899394989013672}),
        # atyronesmith/ft docs/ENHANCED_TRAINING_LOGS.md (loguru)
        ("2025-09-20 22:31:25.227 | INFO     | finetune.training.trainer:train:481 - ✅ Epoch 1/3 | Step 1/150 | "
         "loss=10.2313 | avg_loss=10.2313 | lr=1.00e-05 | grad_norm=2.3456 | steps/s=0.85",
         {"epoch": 1, "step": 1, "loss": 10.2313, "lr": 1e-05, "grad_norm": 2.3456}),
        ("about train:-------> epoch:3 training:[100/500] loss:0.123456 accuracy:91.234567% lr:0.001",
         {"epoch": 3, "loss": 0.123456, "accuracy": 91.234567, "lr": 0.001}),
        ("⏳ Training progress | 10.0% | Loss = 0.123", {"loss": 0.123}),
    ],
)  # fmt: skip
def test_common_print_styles(line, expected):
    got = normalise(parse_metrics(line))
    assert got.keys() >= expected.keys(), got
    assert all(_equal(got[k], v) for k, v in expected.items()), got


@pytest.mark.parametrize(
    "line",
    ["Saving model checkpoint to /ckpt/step_500", "saving checkpoint shard 5 to /ckpt/step_5.pt",
     "Total params: 124 M", "Trainable params: 5", "Non-trainable params: 0", "Modules in eval mode: 0",
     "Total estimated model params size (MB): 0.000", "Total FLOPs: 0",
     "┃   ┃ Name ┃ Type   ┃ Params ┃ Mode  ┃ FLOPs ┃", "│ 0 │ lin  │ Linear │      5 │ train │     0 │"],
)  # fmt: skip
def test_model_summaries_and_prose_hold_no_metrics(line):
    assert parse_metrics(line) == {}


@pytest.mark.parametrize(
    ("name", "expected"),
    [("loss", ("train", "loss")), ("train loss", ("train", "loss")), ("val/loss", ("eval", "loss")),
     ("valid_loss", ("eval", "loss")), ("eval-logloss", ("eval", "loss")), ("val_binary_logloss", ("eval", "loss")),
     ("test acc", ("test", "accuracy")), ("test_loss", ("test", "loss")), ("top1_acc", ("train", "accuracy")),
     ("eval/perplexity", ("eval", "perplexity")), ("train-error", ("train", "error")),
     ("learning_rate", ("train", "lr")),
     ("gnorm", ("train", "grad norm")), ("tokens_per_sec", ("train", "throughput")), ("vocab_size", ("train", None))],
)  # fmt: skip
def test_a_name_maps_to_a_role_and_a_quantity(name, expected):
    assert (role(name), quantity(name)) == expected

"""A non-finite loss under any loss-like name (issue 39, item 5) and what is the loss (item 6): each case on real
lines (printed by the library itself in a subprocess, captured from one, or rendered with a trainer's own print
format, whose source is cited), read the way the agent reads a log, then judged by the default policy."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

from trainwarden.agent.csv_metrics import is_header
from trainwarden.agent.formats import parse_metrics
from trainwarden.agent.logsource import RunLog
from trainwarden.agent.metric_files import CSV, LOG, kind_of, undecided
from trainwarden.agent.tail import LogTail
from trainwarden.core.metrics import canonical, normalise, quantity
from trainwarden.policies.backtest import backtest
from trainwarden.policies.default import default_policy

from trainwarden.cli.policy import log_events

CAPTURED = Path(__file__).resolve().parent.parent / "data" / "logs" / "captured"
POLICY = default_policy()


def metrics_of(path: Path) -> list[dict]:
    log = RunLog(run="r", host="h", tail=LogTail(path))
    return [dict(i.event.data) for i in log.poll(0.0) + log.finish(0.0, final=True) if i.is_metric]


def stop_of(path: Path) -> tuple[str | None, str]:
    result = backtest(POLICY, log_events(path, interval=10))
    stop = result.stop
    return (stop.rule, stop.reason) if stop is not None else (None, "")


def written(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def printed(tmp_path: Path, script: str, name: str = "train.log") -> Path:
    """What `script` prints to a file, as `nohup python train.py > train.log 2>&1` captures it (no TTY, and
    without this machine's PYTHONUNBUFFERED)."""
    path = tmp_path / name
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open(path, "wb") as out:
        subprocess.run([sys.executable, "-c", script], stdout=out, stderr=subprocess.STDOUT, env=env, check=True,
                       timeout=120)  # fmt: skip
    return path


# kohya sd-scripts (train_network.py): `tqdm(range(max_train_steps), smoothing=0, desc="steps")` and, each step,
# `progress_bar.set_postfix(**{"avr_loss": avr_loss})` (renamed from `loss` in kohya-ss/sd-scripts#899)
KOHYA_BAR = """
from tqdm import tqdm
bar = tqdm(range(12), smoothing=0, desc="steps")
losses = []
for step in range(12):
    losses.append(0.11 + 0.01 * (step % 3) if step < 6 else float("nan"))
    bar.update(1)
    bar.set_postfix(**{"avr_loss": sum(losses[-10:]) / len(losses[-10:])})
"""
# a diffusers-style fine-tuning loop: `logs = {"noise_step_loss": diffusion_loss.detach().item(), "lr_vis": ...,
# "lr_unet": ...}; progress_bar.set_postfix(**logs)`, every step, the loss NaN from step 5 on
NOISE_BAR = """
from tqdm.auto import tqdm
bar = tqdm(range(10), desc="Steps")
for step in range(10):
    bar.update(1)
    loss = 0.12 + 0.01 * (step % 3) if step < 4 else float("nan")
    bar.set_postfix(**{"noise_step_loss": loss, "lr_vis": 1e-4 * (step + 1), "lr_unet": 1e-5})
"""


def lua_torch(epoch: int, batch: int, err: float) -> str:
    """A line of Lua Torch's ImageNet example, rendered with its own print (soumith/imagenet-multiGPU.torch,
    train.lua): `('Epoch: [%d][%d/%d]\\tTime %.3f Err %.4f Top1-%%: %.2f LR %.0e DataLoadingTime %.3f')`, where
    `err` is `criterion:forward(outputs, labels)`: the loss (6.9078 = ln 1000 at the start)."""
    return "Epoch: [%d][%d/%d]\tTime %.3f Err %.4f Top1-%%: %.2f LR %.0e DataLoadingTime %.3f" % (  # noqa: UP031 - its own
        epoch, batch, 10000, 0.412, err, 0.39, 0.02, 0.003)  # fmt: skip


def pytorch_gan(batch: int, d_loss: float, g_loss: float) -> str:
    """eriklindernoren/PyTorch-GAN (implementations/gan/gan.py and most of its models), its own print:
    `"[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f]"`."""
    return "[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f]" % (0, 200, batch, 938, d_loss, g_loss)  # noqa: UP031


# -- which name is the loss, which a loss term ----------------------------------------------------------------


def test_kohya_avr_loss_in_a_real_tqdm_postfix_is_the_loss(tmp_path):
    got = metrics_of(printed(tmp_path, KOHYA_BAR))
    losses = [m["loss"] for m in got if "loss" in m]
    assert losses[0] == 0.11 and math.isnan(losses[-1])
    assert not any("avr_loss" in m for m in got)


def test_lua_torch_err_is_the_loss_and_an_error_rate_stays_an_error_rate():
    first, second = (normalise(parse_metrics(lua_torch(1, b, err))) for b, err in ((1, 6.9078), (2, math.nan)))
    assert first["loss"] == 6.9078 and math.isnan(second["loss"])
    # a bare `Err` is the loss; with a prefix it is an error rate (pycls' `top1_err`, `val_err`, `train_err`)
    assert canonical("Err") == "loss" and quantity("Err") == "loss"
    for name in ("val_err", "train_err", "top1_err", "test_err"):
        assert canonical(name) not in ("loss", "val_loss", "err") and quantity(name) == "error", name


def test_pytorch_gan_prints_two_losses_and_both_are_read(tmp_path):
    got = metrics_of(written(tmp_path, "gan.log", [pytorch_gan(5, 0.5832, 0.7104), pytorch_gan(6, math.nan, 0.7211)]))
    assert got[0]["d_loss"] == 0.5832 and got[0]["g_loss"] == 0.7104
    assert math.isnan(got[1]["d_loss"]) and got[1]["g_loss"] == 0.7211  # before: one `loss`, the G loss's
    # a GAN's two losses are terms of one game, neither is THE loss (`loss-runaway` would judge a G loss rising
    # while D wins, which is how a GAN trains)
    assert "loss" not in got[0] and quantity("d_loss") == quantity("g_loss") == "loss"


# -- a CSV logger's file under a log's name ------------------------------------------------------------------


def test_a_keras_csvlogger_file_named_training_log_is_read_as_csv(tmp_path):
    path = CAPTURED / "keras3_csvlogger_nan.training.log"  # Keras 3 CSVLogger("training.log"), its docs' own name
    assert kind_of(path) == CSV
    got = metrics_of(CAPTURED / "hf_trainer5_tqdm_nan.log")  # a console log stays a log
    assert got and kind_of(CAPTURED / "hf_trainer5_tqdm_nan.log") == LOG
    empty = tmp_path / "training.log"
    empty.write_bytes(b"")  # CSVLogger opens its file at on_train_begin, and writes the header after epoch 1
    assert kind_of(empty) == LOG and undecided(empty)
    empty.write_bytes(path.read_bytes()[:20])  # the header half written
    assert undecided(empty)
    empty.write_bytes(path.read_bytes())
    assert kind_of(empty) == CSV and not undecided(empty)


def test_a_csv_header_is_told_from_a_log_line():
    assert is_header("epoch,loss,mae,val_loss,val_mae\n")
    assert is_header("epoch,         train/box_loss,  metrics/mAP50-95(B), lr/pg0\n")  # ultralytics' padding
    for line in ("Epoch 1, loss 0.5\n", "INFO:root:loading data, please wait\n", "a,b\n", "steps:   0%|  | 0/10\r\n",
                 "loss\n", "[2026-01-01 10:00:00,123] loss, acc\n"):  # fmt: skip
        assert not is_header(line), line


# -- the default policy stops each (one backtest per kind) ---------------------------------------------------


def test_backtest_kohya_avr_loss_nan_stops_at_once(tmp_path):
    # a real torch loop behind kohya's bar (tests/data/logs/captured/scripts/names_nan.py kohya)
    assert stop_of(CAPTURED / "kohya_avr_loss_tqdm_nan.log")[0] == "loss-nonfinite"
    assert stop_of(printed(tmp_path, KOHYA_BAR))[0] == "loss-nonfinite"


def test_backtest_noise_step_loss_nan_in_a_bar_stops(tmp_path):
    # the NaN stays NaN redraw after redraw: each new position is a sample, so the term is NaN on 2 logged steps
    rule, reason = stop_of(printed(tmp_path, NOISE_BAR))
    assert rule == "loss-term-nonfinite" and reason.startswith("noise_step_loss=nan")


def test_backtest_lua_torch_err_nan_stops(tmp_path):
    lines = [lua_torch(1, b, 6.9078 - 0.001 * b) for b in range(1, 6)] + [lua_torch(1, 6, float("nan"))]
    assert stop_of(written(tmp_path, "train.log", lines))[0] == "loss-nonfinite"


def test_backtest_a_nan_in_the_d_loss_alone_stops(tmp_path):
    lines = [pytorch_gan(b, 0.58 - 0.01 * b, 0.71 + 0.01 * b) for b in range(5)]
    lines += [pytorch_gan(b, math.nan, 0.75) for b in range(5, 8)]
    rule, reason = stop_of(written(tmp_path, "gan.log", lines))
    assert rule == "loss-term-nonfinite" and reason.startswith("d_loss=nan")


def test_backtest_a_keras_csvlogger_training_log_with_a_nan_loss_stops():
    rule, reason = stop_of(CAPTURED / "keras3_csvlogger_nan.training.log")
    assert rule == "loss-nonfinite" and reason.startswith("loss=nan at step 2")


def test_backtest_a_perplexity_beyond_float32_is_a_divergence(tmp_path):
    # OpenNMT-py's train lines (the shape pasted in OpenNMT/OpenNMT-py#709 and #1072), its perplexity
    # `exp(min(loss, 100))` printed with `%6.2f`: a cross-entropy past 100 nats prints exp(100) = 2.7e43, finite
    def onmt(step: int, xent: float) -> str:
        ppl = math.exp(min(xent, 100))
        return "Step %d/100000; acc: %6.2f; ppl: %5.2f; xent: %4.2f; lr: 0.00070; 1928/2310 tok/s; %6.0f sec" % (  # noqa: UP031
            step, 4.1, ppl, xent, step * 3.6)  # fmt: skip

    healthy = [onmt(s, 9.4 - 0.001 * s) for s in range(50, 400, 50)]
    assert stop_of(written(tmp_path, "ok.log", healthy))[0] is None  # ppl 12000: a young model, not an overflow
    rule, reason = stop_of(written(tmp_path, "onmt.log", [*healthy, onmt(400, 312.5)]))
    assert rule == "ppl-nonfinite" and "beyond float32's range" in reason
    # the same bound on any spelling of it, and in scientific notation (`ppl: 2.7e+43`)
    lines = ["Epoch 1, 100/21692; acc: 3.08; ppl: 12000.7; xent: 9.39", "Epoch 1, 150/21692; acc: 0.08; ppl: 2.7e+43"]
    assert stop_of(written(tmp_path, "sci.log", lines))[0] == "ppl-nonfinite"


def test_backtest_a_loss_beyond_float32_is_an_overflow_not_a_number(tmp_path):
    lines = [f"step {s} loss={2.5 - 0.01 * s:.4f}" for s in range(1, 6)] + ["step 6 loss=4.1e+39"]
    rule, reason = stop_of(written(tmp_path, "train.log", lines))
    assert rule == "loss-nonfinite" and reason.startswith("loss=4.1e+39, beyond float32's range")

from dataclasses import replace

from trainwarden.remote.fleet import CheckpointConfig
from trainwarden.remote.retention import CheckpointFile, doomed, parse_name, plan_retention

CONFIG = CheckpointConfig(dir="/ckpt", best_metric="val_loss", mode="min", milestones=(25, 50, 75))
KEEP_BEST = replace(CONFIG, failed_runs="keep_best")
UNKNOWN = "no file name or checkpoint.saved event carries val_loss: best unknown"
ONLY_NUMBERED = "best unknown: only numbered intermediates may be deleted, everything else is kept"


def files(*specs):
    out = []
    for i, (epoch, metric) in enumerate(specs):
        name = f"epoch_{epoch}" + (f"_val_loss={metric}" if metric is not None else "") + ".pt"
        out.append(CheckpointFile(name=name, size=100, mtime=float(i), epoch=epoch, metric=metric))
    return out


def test_parse_name():
    assert parse_name("epoch_25_val_loss=2.31.pt", "val_loss") == (25, None, 2.31)
    assert parse_name("step=1200-val_loss_1e-3.ckpt", "val_loss") == (None, 1200, 0.001)
    assert parse_name("model.pt", "val_loss") == (None, None, None)


def test_keeps_latest_best_and_milestones():
    plan = plan_retention(files((10, 3.0), (25, 2.5), (30, 2.1), (50, 2.4), (60, 2.6)), CONFIG, failed=False)
    assert set(plan.keep) == {"epoch_30_val_loss=2.1.pt", "epoch_25_val_loss=2.5.pt", "epoch_50_val_loss=2.4.pt",
                              "epoch_60_val_loss=2.6.pt"}  # fmt: skip
    assert plan.keep["epoch_30_val_loss=2.1.pt"] == ("best val_loss=2.1",)
    assert plan.delete == ("epoch_10_val_loss=3.0.pt",)
    assert plan.freed_bytes == 100


def test_max_mode_picks_the_highest():
    config = CheckpointConfig(dir="/c", best_metric="acc", mode="max")
    plan = plan_retention(files((1, 0.5), (2, 0.9), (3, 0.7)), config, failed=False)
    assert plan.keep["epoch_2_val_loss=0.9.pt"] == ("best acc=0.9",)
    assert plan.delete == ("epoch_1_val_loss=0.5.pt",)


def test_unknown_best_is_said():
    plan = plan_retention(files((1, None), (2, None)), CONFIG, failed=False)
    assert plan.notes == (UNKNOWN, ONLY_NUMBERED)
    assert plan.delete == ("epoch_1.pt",)


def test_failed_run_set_to_keep_best_loses_weights_but_the_best():
    plan = plan_retention(files((10, 3.0), (25, 2.5), (30, 2.9)), KEEP_BEST, failed=True)
    assert list(plan.keep) == ["epoch_25_val_loss=2.5.pt"]
    assert set(plan.delete) == {"epoch_10_val_loss=3.0.pt", "epoch_30_val_loss=2.9.pt"}


def test_never_deletes_the_only_checkpoint():
    for failed in (False, True):
        plan = plan_retention(files((3, None)), KEEP_BEST, failed=failed)
        assert plan.delete == ()


def test_failed_run_without_metric_keeps_the_latest():
    plan = plan_retention(files((1, None), (2, None)), KEEP_BEST, failed=True)
    assert list(plan.keep) == ["epoch_2.pt"] and plan.delete == ("epoch_1.pt",)


def named(*names: str) -> list[CheckpointFile]:
    """Files in the order they were written (mtime), their numbers read from their names as listing does."""
    out = []
    for i, name in enumerate(names):
        epoch, step, metric = parse_name(name, CONFIG.best_metric)
        out.append(CheckpointFile(name=name, size=100, mtime=float(i), epoch=epoch, step=step, metric=metric))
    return out


def test_the_names_labs_keep_by_are_never_deleted():
    # the procedure's own layout: epoch_1.pt ... epoch_80.pt beside best.pt and latest.pt (the dry run listed
    # `delete best.pt` and `delete latest.pt`: no file name carried val_loss, so the best was unknown)
    layout = named(*(f"epoch_{n}.pt" for n in range(1, 81)), "best.pt", "latest.pt")
    for failed in (False, True):
        plan = plan_retention(layout, KEEP_BEST, failed=failed)
        assert {"best.pt", "latest.pt"} <= set(plan.keep), failed
        assert "best.pt" not in plan.delete and "latest.pt" not in plan.delete
    plan = plan_retention(layout, CONFIG, failed=False)
    assert plan.keep["best.pt"] == ("named best, latest or last: never deleted",)
    assert {"epoch_80.pt", "epoch_25.pt", "epoch_50.pt", "epoch_75.pt"} <= set(plan.keep)
    assert "epoch_1.pt" in plan.delete


def test_trainers_layouts_keep_their_best_and_last():
    # ultralytics weights/ (best.pt, last.pt, epochN.pt with save_period); Lightning's ModelCheckpoint
    # (`epoch=3-step=400.ckpt`, `last.ckpt`); timm's `model_best.pth.tar` beside `checkpoint-N.pth.tar`
    ultralytics = plan_retention(named("epoch10.pt", "epoch20.pt", "best.pt", "last.pt"), CONFIG, failed=False)
    assert {"best.pt", "last.pt", "epoch20.pt"} <= set(ultralytics.keep) and ultralytics.delete == ("epoch10.pt",)
    lightning = plan_retention(named("epoch=1-step=200.ckpt", "epoch=3-step=400.ckpt", "last.ckpt"),
                               CheckpointConfig(dir="/c", pattern="*.ckpt"), failed=False)  # fmt: skip
    assert "last.ckpt" in lightning.keep and lightning.delete == ("epoch=1-step=200.ckpt",)
    timm = plan_retention(named("checkpoint-1.pth.tar", "checkpoint-2.pth.tar", "model_best.pth.tar"), CONFIG,
                          failed=False)  # fmt: skip
    assert "model_best.pth.tar" in timm.keep and "model_best.pth.tar" not in timm.delete
    elastic = plan_retention(named("elastic_epoch_1.pt", "elastic_epoch_2.pt"), CONFIG, failed=False)
    assert elastic.delete == ("elastic_epoch_1.pt",)  # "last" inside a word is no name to keep by


def test_with_the_best_unknown_only_numbered_intermediates_go():
    plan = plan_retention(named("epoch_1.pt", "final_weights.pt", "epoch_2.pt"), CONFIG, failed=False)
    assert plan.keep["final_weights.pt"] == ("best unknown: not a numbered intermediate",)
    assert plan.delete == ("epoch_1.pt",)
    assert plan.notes == (UNKNOWN, ONLY_NUMBERED)


def test_the_newest_file_is_kept_when_numbers_say_another_is_latest():
    # a run restarted from scratch writes epoch_1.pt again after epoch_9.pt: the newest file is its work
    plan = plan_retention(named("epoch_8.pt", "epoch_9.pt", "epoch_1_restarted.pt"), CONFIG, failed=False)
    assert plan.keep["epoch_1_restarted.pt"] == ("newest file",) and plan.delete == ("epoch_8.pt",)


def test_a_run_the_watchdog_stopped_is_treated_as_failed():
    by_rule = [{"type": "stop.requested", "by": "policy", "rule": "loss-nonfinite"}, {"type": "stop.done"}]
    by_hand = [{"type": "stop.requested", "by": "cli", "rule": None, "reason": "good enough"}, {"type": "stop.done"}]
    assert doomed("stopped", by_rule) and doomed("failed", [])
    assert not doomed("stopped", by_hand) and not doomed("finished", []) and not doomed("running", by_rule)

from trainwarden.remote.fleet import CheckpointConfig
from trainwarden.remote.retention import CheckpointFile, parse_name, plan_retention

CONFIG = CheckpointConfig(dir="/ckpt", best_metric="val_loss", mode="min", milestones=(25, 50, 75))


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
    assert plan.notes == ("no file name carries val_loss: best unknown",)
    assert plan.delete == ("epoch_1.pt",)


def test_failed_run_loses_weights_but_keeps_the_best():
    plan = plan_retention(files((10, 3.0), (25, 2.5), (30, 2.9)), CONFIG, failed=True)
    assert list(plan.keep) == ["epoch_25_val_loss=2.5.pt"]
    assert set(plan.delete) == {"epoch_10_val_loss=3.0.pt", "epoch_30_val_loss=2.9.pt"}


def test_never_deletes_the_only_checkpoint():
    for failed in (False, True):
        plan = plan_retention(files((3, None)), CONFIG, failed=failed)
        assert plan.delete == ()


def test_failed_run_without_metric_keeps_the_latest():
    plan = plan_retention(files((1, None), (2, None)), CONFIG, failed=True)
    assert list(plan.keep) == ["epoch_2.pt"] and plan.delete == ("epoch_1.pt",)
